"""What the store-fault tests need from the machine: size-limited and read-only mounts (as
root), a process that cannot override file permissions, a saver whose disk fills up after N
writes, and a private Postgres cluster a test may stop and start.

Mounts are always unmounted and clusters always stopped on the way out, whatever the test did.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver

from gated_react._engine.authority.ledger import ledger_for

from ..support import pg
from ..support.procs import NodeWatch
from ..support.reaping import PATIENCE

ROOT = os.geteuid() == 0
REPO = Path(__file__).resolve().parents[2]
DISK_FULL = "database or disk is full"  # SQLite's own words for SQLITE_FULL


# --- mounts --------------------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``path``; the test skips where mounting is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    made = _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {made.stderr.strip()}")
    try:
        yield path
    finally:
        unmount(path)


def remount(path: Path, *, read_only: bool) -> None:
    made = _mount("-o", f"remount,{'ro' if read_only else 'rw'}", str(path))
    assert made.returncode == 0, made.stderr


def unmount(path: Path) -> None:
    """Unmount, waiting out a process that still closes its files; lazily as a last resort."""
    for _ in range(50):
        if _mount_cmd("umount", str(path)).returncode == 0:
            return
        time.sleep(0.1)
    lazy = _mount_cmd("umount", "-l", str(path))
    assert lazy.returncode == 0, lazy.stderr


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return _mount_cmd("mount", *args)


def _mount_cmd(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which(args[0]) is None:
        return subprocess.CompletedProcess(args, 1, "", f"no {args[0]} command")
    return subprocess.run(args, capture_output=True, text=True, timeout=PATIENCE, check=False)


def fill(folder: Path) -> Path:
    """Write zeros into ``folder`` until its file system is full; the file to delete after."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    block = b"\0" * 4096
    try:
        while True:
            os.write(fd, block)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    # tmpfs hands out whole pages: a last few bytes may still fit; take them too.
    with contextlib.suppress(OSError), filler.open("ab", buffering=0) as out:
        while out.write(b"\0"):
            pass
    return filler


# --- permissions ---------------------------------------------------------------------------


def unprivileged() -> list[str]:
    """A command prefix under which file permissions apply, even to root (which ignores them
    through CAP_DAC_OVERRIDE): the capabilities that bypass them are dropped."""
    if not ROOT:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: chmod cannot make a file read-only here")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


def read_only(*paths: Path) -> None:
    for path in paths:
        if path.exists():
            path.chmod(0o555 if path.is_dir() else 0o444)


def writable(*paths: Path) -> None:
    for path in paths:
        if path.exists():
            path.chmod(0o755 if path.is_dir() else 0o644)


def store_files(db: Path) -> list[Path]:
    """The SQLite file and its companions (WAL, shared memory, the thread-lock sidecar)."""
    return [db.with_name(db.name + suffix) for suffix in ("", "-wal", "-shm", ".locks")]


# --- a disk that fills up, simulated -------------------------------------------------------


class FillsUp:
    """Makes a saver's writes fail as SQLite does on a full disk, from write ``after + 1`` on.
    Writes are checkpoints (``put``), pending writes and the run's records (the table beside
    the checkpoints, in the same file)."""

    def __init__(self, saver: BaseCheckpointSaver[Any], after: int) -> None:
        self.after, self.writes, self.full = after, 0, False
        self._put, self._put_writes = saver.put, saver.put_writes
        saver.put = self.put  # type: ignore[method-assign]
        saver.put_writes = self.put_writes  # type: ignore[method-assign]
        backend = ledger_for(saver).backend
        self._insert, self._claim = backend.insert, backend.claim
        backend.insert = self.insert  # type: ignore[method-assign]
        backend.claim = self.claim  # type: ignore[method-assign]

    def _write(self) -> None:
        self.writes += 1
        if self.writes > self.after:
            self.full = True
        if self.full:
            raise sqlite3.OperationalError(DISK_FULL)

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self._write()
        return self._put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> Any:
        self._write()
        return self._put_writes(*args, **kwargs)

    def insert(self, records: Any) -> Any:
        self._write()
        return self._insert(records)

    def claim(self, record: Any) -> Any:
        self._write()
        return self._claim(record)


# --- a private Postgres cluster to restart -------------------------------------------------


class Cluster:
    """``scripts/pg-cluster`` in a folder of its own, which a test may stop and start again on
    the same port (the shared test server must never be restarted)."""

    def __init__(self) -> None:
        if pg.server_url() is None:
            pg.unavailable(f"{pg.URL_VAR} is not set")
        self.bin = _pg_bindir()
        if self.bin is None:
            pg.unavailable("no PostgreSQL binaries (initdb, pg_ctl) on this machine")
        self.dir = Path(tempfile.mkdtemp(prefix="gr-pg-restart-"))
        self.dir.chmod(0o755)  # as root the server runs as `postgres`, which must reach it
        made = subprocess.run(
            [str(REPO / "scripts" / "pg-cluster"), "start", str(self.dir)],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if made.returncode != 0:
            self.close()
            pg.unavailable(f"the private cluster did not start: {made.stderr.strip()[-300:]}")
        self.url = made.stdout.strip().splitlines()[-1]
        self.port = (self.dir / "port").read_text().strip()

    def stop(self) -> None:
        """A fast shutdown: every connection is cut, as in a server restart."""
        self._ctl("-m", "fast", "-w", "-t", "60", "stop")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._ctl("-l", str(self.dir / "server.log"), "-w", "-t", "60", "-o", options, "start")

    def running(self) -> bool:
        return (self.dir / "data" / "postmaster.pid").exists()

    def _ctl(self, *args: str) -> None:
        owner = ["runuser", "-u", "postgres", "--"] if ROOT else []
        command = [*owner, f"{self.bin}/pg_ctl", "-D", str(self.dir / "data"), *args]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PATIENCE, check=False
        )
        assert done.returncode == 0, done.stderr

    def close(self) -> None:
        with contextlib.suppress(AssertionError, subprocess.SubprocessError, OSError):
            if self.running():
                self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def _pg_bindir() -> str | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if found:
        return str(found[-1].parent)
    on_path = shutil.which("pg_ctl")
    return str(Path(on_path).parent) if on_path else None


def with_password(url: str, password: str) -> str:
    """The server URL with a password in it (trust auth accepts any): for secret checks."""
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{password}@", 1)


# --- doing something to the store at a chosen node -----------------------------------------


# Where the fault tests strike: (scenario, node, its occurrence in the run).
FAULT_POINTS = [
    ("refund", "decide", 2),
    ("refund", "execute", 2),
    ("refund", "observe", 3),
    ("append", "gate", 1),
    ("append", "execute", 1),
    ("append", "observe", 1),
]


class AtNode(NodeWatch):
    """Calls ``action()`` as ``node`` starts for the ``occurrence``-th time in this process."""

    def __init__(self, node: str, occurrence: int, action: Callable[[], None]) -> None:
        super().__init__(node, occurrence)
        self.action = action

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if self.hit(metadata, kwargs.get("name")):
            self.action()


def terminate_backends(url: str, database: str, *, but: int | None = None) -> int:
    """Cut every connection to ``database`` (``pg_terminate_backend``); how many were cut."""
    import psycopg

    query = (
        "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid() AND pid <> %s"
    )
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(query, (database, but or 0)).fetchone()
    return int(row[0]) if row else 0
