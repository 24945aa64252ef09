"""A fleet for fault tests: a private Postgres cluster the test may restart (never the shared
one), the ``-n`` supervisor as an operator starts it, and the faults themselves.

Every process started here is reaped on every path: ``Fleet.close()`` stops the supervisor,
SIGKILLs any worker left, and waits for all of them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from .procs import WAIT, wait_until

PG_CLUSTER = Path(__file__).resolve().parents[2] / "scripts" / "pg-cluster"


@contextmanager
def private_cluster() -> Iterator[tuple[str, Path]]:
    """A cluster of the test's own (``scripts/pg-cluster``): its URL and folder; stopped and
    removed on exit. The folder is a ``mkdtemp`` one: as root the server runs as `postgres`,
    which cannot reach pytest's private tmp_path."""
    folder = Path(tempfile.mkdtemp(prefix="gr-fleet-"))
    folder.chmod(0o755)
    try:
        started = subprocess.run(
            [str(PG_CLUSTER), "start", str(folder)], capture_output=True, text=True, check=False
        )
        try:
            assert started.returncode == 0, started.stderr
            yield started.stdout.strip(), folder
        finally:
            subprocess.run([str(PG_CLUSTER), "stop", str(folder)], capture_output=True, check=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def restart_cluster(folder: Path, seconds_down: float = 0.0) -> None:
    """``pg_ctl -m fast`` stop (every client dropped), some time down, the same port again."""
    done = subprocess.run(
        [str(PG_CLUSTER), "restart", str(folder), str(seconds_down)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def terminate_clients(url: str, *, this_database_only: bool = False) -> int:
    """``pg_terminate_backend`` of every other client of the cluster (or only of the database
    of ``url``, on a server other tests share); how many there were."""
    where = " AND datname = current_database()" if this_database_only else ""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'" + where
        ).fetchall()
    return len(rows)


def registered(url: str, fresh_within: float) -> list[tuple[int, bool]]:
    """Each worker procrastinate has registered: its id, and whether its heartbeat is fresh
    (a worker that reconnected leaves its old row behind until it is pruned)."""
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT id, last_heartbeat > now() - make_interval(secs => %s)"
            " FROM procrastinate_workers ORDER BY id",
            (fresh_within,),
        ).fetchall()
    return [(int(worker), bool(fresh)) for worker, fresh in found]


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


class Fleet:
    """``python -m gated_react.workers -n N`` with its stderr in ``log``."""

    def __init__(self, url: str, graph: str, log: Path, *options: str) -> None:
        command = [sys.executable, "-m", "gated_react.workers", "--store", url, "--graph", graph]
        self.log = log
        with log.open("wb") as err:
            self.proc = subprocess.Popen([*command, *options], stderr=err, env=os.environ.copy())

    def workers(self) -> list[int]:
        return children(self.proc.pid)

    def wait_for_workers(self, count: int) -> list[int]:
        wait_until(lambda: len(self.workers()) == count)
        return self.workers()

    def kill_one(self) -> int:
        """SIGKILL one worker, as the OOM killer would; its pid."""
        victim = self.workers()[0]
        os.kill(victim, signal.SIGKILL)
        return victim

    def stop(self) -> int:
        """SIGTERM: the supervisor drains its workers; its exit code."""
        self.proc.terminate()
        return self.proc.wait(WAIT * 2)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # no more replacements
            for pid in self.workers():
                os.kill(pid, signal.SIGKILL)
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(WAIT)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")
