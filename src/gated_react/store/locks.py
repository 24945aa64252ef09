"""One advancer per thread: two workers must never run the same thread at once, as that forks
its checkpoint history and can repeat side effects.

The lock is taken without waiting; a second advancer gets ``ThreadBusy`` and changes nothing.
Across processes it is a Postgres session advisory lock, or for SQLite a byte-range lock in a
sidecar file (``runs.sqlite.locks``); the kernel or the server drops either when its holder dies,
so a crashed worker never leaves a thread locked. Within a process a registry does the same job.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import struct
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from gated_react.errors import GatedReactError, StoreError
from gated_react.store.signed import unwrapped


class ThreadBusy(GatedReactError, RuntimeError):
    """Another run is advancing this thread right now."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"thread {thread_id!r} is being advanced by another run; nothing was changed"
        )
        self.thread_id = thread_id


_held: set[tuple[str, str]] = set()
_held_guard = threading.Lock()
_lock_files: dict[str, int] = {}  # one descriptor per sidecar, kept open: closing drops POSIX locks
_probe_files: dict[str, int] = {}  # read-only ones ``held`` reads locks through, kept open too


def lock_key(thread_id: str) -> int:
    """A stable signed 63-bit number for the thread (Postgres advisory key, file offset)."""
    return int(hashlib.sha256(thread_id.encode()).hexdigest()[:15], 16)


@contextmanager
def thread_lock(saver: BaseCheckpointSaver[Any] | None, thread_id: str) -> Iterator[None]:
    """Hold the thread for the duration of the block, or raise ``ThreadBusy`` at once."""
    conn = getattr(saver, "conn", None)
    cross: AbstractContextManager[None] = nullcontext()
    scope = _scope(saver)
    if _is_sqlite(conn):
        path = conn.execute("PRAGMA database_list").fetchone()[2]  # type: ignore[union-attr]
        scope, cross = f"sqlite:{path}", _file_lock(path, thread_id)
    elif _is_postgres(saver):
        cross = _pg_lock(saver, thread_id)
    with _in_process(scope, thread_id), cross:
        yield


@asynccontextmanager
async def athread_lock(
    saver: BaseCheckpointSaver[Any] | None, thread_id: str
) -> AsyncIterator[None]:
    """The async twin of ``thread_lock`` for async savers."""
    conn = getattr(saver, "conn", None)
    cross: AbstractAsyncContextManager[None] = nullcontext()
    scope = _scope(saver)
    if type(conn).__module__.startswith("aiosqlite"):
        async with conn.execute("PRAGMA database_list") as cursor:  # type: ignore[union-attr]
            path = (await cursor.fetchone())[2]
        scope, cross = f"sqlite:{path}", _afile_lock(path, thread_id)
    elif _is_postgres(saver):
        cross = _apg_lock(saver, thread_id)
    with _in_process(scope, thread_id):
        async with cross:
            yield


def _scope(saver: BaseCheckpointSaver[Any] | None) -> str:
    saver = unwrapped(saver)  # a saver signing with a store key is the saver it wraps
    return f"{type(saver).__name__}:{id(saver)}"


def _is_sqlite(conn: Any) -> bool:
    return type(conn).__module__ == "sqlite3"


def _is_postgres(saver: BaseCheckpointSaver[Any] | None) -> bool:
    """LangGraph's Postgres savers and their subclasses (the workers' ``store.coalesced``)."""
    return any(
        kind.__module__.startswith("langgraph.checkpoint.postgres")
        for kind in type(unwrapped(saver)).__mro__
    )


@contextmanager
def _in_process(scope: str, thread_id: str) -> Iterator[None]:
    key = (scope, thread_id)
    with _held_guard:
        if key in _held:
            raise ThreadBusy(thread_id)
        _held.add(key)
    try:
        yield
    finally:
        with _held_guard:
            _held.discard(key)


@contextmanager
def _file_lock(db_path: str, thread_id: str) -> Iterator[None]:
    if not db_path:  # an in-memory SQLite database is private to this process
        yield
        return
    sidecar = f"{db_path}.locks"
    with _held_guard:
        if sidecar not in _lock_files:
            _lock_files[sidecar] = _open_sidecar(sidecar)
        fd = _lock_files[sidecar]
    offset = lock_key(thread_id)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            raise ThreadBusy(thread_id) from None
        raise
    try:
        yield
    finally:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)


def _open_sidecar(sidecar: str) -> int:
    try:
        return os.open(sidecar, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:  # e.g. a read-only store folder or file: one line, nothing changed
        raise StoreError(f"cannot open the lock file {sidecar}: {exc.strerror}") from None


@asynccontextmanager
async def _afile_lock(db_path: str, thread_id: str) -> AsyncIterator[None]:
    with _file_lock(db_path, thread_id):  # non-blocking: safe on the event loop
        yield


_TRY = "SELECT pg_try_advisory_lock(%s) AS ok"
_UNLOCK = "SELECT pg_advisory_unlock(%s) AS ok"


@contextmanager
def _pg_lock(saver: Any, thread_id: str) -> Iterator[None]:
    key = lock_key(thread_id)
    pool = saver.conn if hasattr(saver.conn, "getconn") else None
    conn = pool.getconn() if pool is not None else saver.conn
    try:
        with saver.lock:
            got = conn.execute(_TRY, (key,)).fetchone()["ok"]
        if not got:
            raise ThreadBusy(thread_id)
        try:
            yield
        finally:
            if not conn.closed:  # a lost connection took its session lock with it
                with saver.lock:
                    conn.execute(_UNLOCK, (key,))
    finally:
        if pool is not None:
            pool.putconn(conn)


@asynccontextmanager
async def _apg_lock(saver: Any, thread_id: str) -> AsyncIterator[None]:
    if hasattr(saver.conn, "getconn"):  # a pool: the lock holds one session for the block
        async with saver.conn.connection() as conn, _apg_session_lock(saver, conn, thread_id):
            yield
        return
    async with _apg_session_lock(saver, saver.conn, thread_id):
        yield


@asynccontextmanager
async def _apg_session_lock(saver: Any, conn: Any, thread_id: str) -> AsyncIterator[None]:
    key = lock_key(thread_id)
    async with saver.lock:
        got = (await (await conn.execute(_TRY, (key,))).fetchone())["ok"]
    if not got:
        raise ThreadBusy(thread_id)
    try:
        yield
        if (flush := getattr(saver, "aflush", None)) is not None:
            await flush()  # what a coalescing saver holds lands while the thread is still ours
    finally:
        if not conn.closed:
            async with saver.lock:
                try:
                    await conn.execute(_UNLOCK, (key,))
                except Exception:
                    if not conn.closed:  # only a connection lost just now took the lock along
                        raise


def held(saver: BaseCheckpointSaver[Any] | None, thread_id: str) -> bool:
    """Whether a run holds the thread's lock right now, found without taking it: a run that
    starts while a listing looks is not turned away as busy. (Where the lock cannot be read
    without taking it, off Linux, it is taken for an instant.)"""
    conn = getattr(saver, "conn", None)
    if _is_sqlite(conn):
        path = conn.execute("PRAGMA database_list").fetchone()[2]  # type: ignore[union-attr]
        if (f"sqlite:{path}", thread_id) in _held:
            return True
        return bool(path) and _file_held(f"{path}.locks", thread_id)
    if (_scope(saver), thread_id) in _held:
        return True
    return _is_postgres(saver) and _pg_held(saver, thread_id)


# struct flock as Linux lays it out: type, whence, start, length, pid, padded to 8 bytes.
_FLOCK = "@hhqqi0q"


def _file_held(sidecar: str, thread_id: str) -> bool:
    """Whether another process holds the thread's byte in the sidecar (``F_GETLK``)."""
    if sys.platform != "linux":
        return _taken_for_an_instant(sidecar, thread_id)
    fd = _probe_fd(sidecar)
    if fd is None:  # no sidecar: no run has locked a thread of this store yet
        return False
    asked = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, lock_key(thread_id), 1, 0)
    found = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, asked))
    return bool(found[0] != fcntl.F_UNLCK)


def _probe_fd(sidecar: str) -> int | None:
    """A descriptor of the sidecar, kept open: closing any descriptor of a file drops every
    POSIX lock this process holds on it (its own runs' thread locks)."""
    with _held_guard:
        fd = _lock_files.get(sidecar, _probe_files.get(sidecar))
        if fd is None:
            try:
                fd = _probe_files[sidecar] = os.open(sidecar, os.O_RDONLY)
            except OSError:
                return None
        return fd


def _taken_for_an_instant(sidecar: str, thread_id: str) -> bool:
    try:
        with _file_lock(sidecar.removesuffix(".locks"), thread_id):
            return False
    except ThreadBusy:
        return True
    except OSError:
        return False


_HELD = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1) AS held"
)


def _pg_held(saver: Any, thread_id: str) -> bool:
    """Whether a session holds the thread's advisory lock (``pg_locks``: a bigint key is its
    high half in ``classid``, its low half in ``objid``)."""
    key = lock_key(thread_id)
    pool = saver.conn if hasattr(saver.conn, "getconn") else None
    conn = pool.getconn() if pool is not None else saver.conn
    try:
        with saver.lock:
            row = conn.execute(_HELD, (key >> 32, key & 0xFFFFFFFF)).fetchone()
    finally:
        if pool is not None:
            pool.putconn(conn)
    return bool(row["held"])
