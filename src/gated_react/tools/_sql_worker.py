"""The SQL tool's worker: one read-only query in a process of its own, so that the caller can kill
it at the deadline. A single SQLite step (``instr`` on two 1 MB strings takes seconds) never
reaches a progress handler, so only a kill bounds it.

Run as ``python -I -S _sql_worker.py``: the request ``(database, sql, max_rows, seconds)`` comes
on stdin and the reply ``("ok", result)`` or ``("error", line)`` goes to stdout, both as
``marshal`` (plain values only). Standard library only: it starts without importing the package.
It kills itself a second after ``seconds`` and may use at most ``MEMORY_BYTES``.

Nothing may appear next to the database. A read-only connection creates no rollback journal,
but on a database in WAL mode it creates ``-wal`` and ``-shm`` files when they are missing. So
the worker first takes SQLite's own SHARED lock on the file, then reads the header:

- rollback journal: ``mode=ro``; SQLite's locking gives a consistent snapshot.
- WAL, with ``-wal`` and ``-shm`` present (a writer has it open): ``mode=ro`` uses the files
  that are there; the lock stops the last writer from deleting them (its checkpoint at close
  needs an EXCLUSIVE lock), which would make SQLite create them again.
- WAL, no write-ahead log: every commit is in the main file, read with ``immutable=1`` (no
  files, no locks of SQLite's). The lock stops a writer that opens meanwhile from changing the
  journal mode or checkpointing at close, so its commits stay in its own log; one that writes
  1,000 pages or checkpoints by hand could still rewrite the file, so a file that changed while
  it was read gives an error, not rows.
- WAL, a log without ``-shm`` (a writer crashed): refused; reading it would need a recovery.

The lock is held on a descriptor that stays open until the connection is closed: closing any
descriptor of a file drops all of the process's POSIX locks on it, SQLite's included.
"""

from __future__ import annotations

import errno
import fcntl
import marshal
import os
import resource
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

MAX_ROWS = 50
MAX_SECONDS = 5.0
MAX_VALUE_BYTES = 1_000_000
MAX_RESULT_BYTES = 64_000_000
LOCK_WAIT_SECONDS = 2.0
MEMORY_BYTES = 1 << 30

# SQLite's lock bytes (os_unix.c): readers lock the PENDING byte, then a shared range.
_PENDING_BYTE = 0x40000000
_SHARED_FIRST = _PENDING_BYTE + 2
_SHARED_SIZE = 510
_WAL_READ_VERSION = 2  # header byte 19: 2 means WAL mode

# What a query may do; everything else (writes, ATTACH, PRAGMA, ...) is denied by the authorizer.
_ALLOWED_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})


class Refused(Exception):
    """The database cannot be read as asked; the message is one line."""


def authorize(action: int, _arg1: str | None, arg2: str | None, *_: Any) -> int:
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def lock_shared(fd: int, wait: float) -> None:
    """SQLite's SHARED lock, as a reader takes it; ``database is locked`` after ``wait`` s."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, _PENDING_BYTE)
            try:
                fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, _SHARED_SIZE, _SHARED_FIRST)
                return
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, _PENDING_BYTE)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise Refused(f"cannot lock the database: {exc.strerror}") from None
            if time.monotonic() > deadline:
                raise Refused("database is locked") from None
            time.sleep(0.01)


def open_params(database: str, fd: int) -> str:
    """The URI parameters that read ``database`` without creating a file (the module docstring
    says why each is safe); call it with the shared lock held."""
    if os.pread(fd, 100, 0)[19:20] != bytes([_WAL_READ_VERSION]):
        return "mode=ro"
    wal = Path(f"{database}-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        return "mode=ro&immutable=1"
    if Path(f"{database}-shm").exists():
        return "mode=ro"
    raise Refused(
        f"{wal.name} was left by a writer that did not close; open the database once with a "
        "writer to recover it"
    )


def open_layers(database: str, params: str) -> sqlite3.Connection:
    """A connection with three read-only layers, each enough on its own against writes to the
    file: the read-only open, ``query_only`` (which also covers the temp database) and the
    authorizer (which also refuses ATTACH, PRAGMA and file functions)."""
    uri = f"{Path(database).as_uri()}?{params}"
    conn = sqlite3.connect(uri, uri=True, timeout=LOCK_WAIT_SECONDS)
    try:
        conn.execute("PRAGMA query_only = ON")
        # No single value above MAX_VALUE_BYTES: zeroblob(5e8) would allocate the memory at once.
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        conn.execute("SELECT count(*) FROM sqlite_master")  # load the schema before the authorizer
        conn.set_authorizer(authorize)
    except BaseException:
        conn.close()
        raise
    return conn


class Session:
    """One database opened read-only (see the module docstring); ``close`` when done."""

    def __init__(self, database: str, wait: float = LOCK_WAIT_SECONDS) -> None:
        self.fd = os.open(database, os.O_RDONLY)
        try:
            lock_shared(self.fd, wait)
            self.params = open_params(database, self.fd)
            self._before = _version(self.fd)
            self.conn = open_layers(database, self.params)
        except BaseException:
            os.close(self.fd)
            raise

    def check_unchanged(self) -> None:
        """Refuse what was read if the file changed under a lock-free (immutable) reader."""
        if "immutable" in self.params and _version(self.fd) != self._before:
            raise Refused("the database changed while it was read; run the query again")

    def close(self) -> None:
        self.conn.close()
        os.close(self.fd)  # after the connection: it drops every lock the process holds on it


def _version(fd: int) -> tuple[int, int, int]:
    info = os.fstat(fd)
    return info.st_size, info.st_mtime_ns, info.st_ctime_ns


def query(database: str, sql: str, max_rows: int = MAX_ROWS) -> dict[str, Any]:
    """Rows of one read-only statement, at most ``max_rows`` and ``MAX_RESULT_BYTES``."""
    session = Session(database)
    try:
        cursor = session.conn.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows, truncated = _fetch(cursor, max_rows)
        session.check_unchanged()
    finally:
        session.close()
    return {"columns": columns, "rows": rows, "row_count": len(rows), "truncated": truncated}


def _fetch(cursor: sqlite3.Cursor, max_rows: int) -> tuple[list[list[Any]], bool]:
    rows: list[list[Any]] = []
    size = 0
    for row in cursor:
        size += sum(_size(value) for value in row)
        if len(rows) == max_rows or size > MAX_RESULT_BYTES:
            return rows, True
        rows.append(list(row))
    return rows, False


def _size(value: object) -> int:
    if isinstance(value, str):
        return len(value.encode())
    return len(value) if isinstance(value, bytes) else 8


def main() -> None:
    database, sql, max_rows, seconds = marshal.load(sys.stdin.buffer)
    # If the caller is gone, the worker still ends: SIGALRM's default action kills the process
    # even inside a long SQLite step, where no Python handler could run.
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, seconds + 1)
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    limit = MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(MEMORY_BYTES, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    reply: tuple[str, Any]
    try:
        reply = ("ok", query(database, sql, max_rows))
    except MemoryError:
        reply = ("error", f"out of memory: a query may use {MEMORY_BYTES >> 20} MB")
    except (sqlite3.Error, Refused, OSError) as exc:
        reply = ("error", " ".join(str(exc).split()) or type(exc).__name__)
    sys.stdout.buffer.write(marshal.dumps(reply))


if __name__ == "__main__":
    main()
