"""LangGraph's own checkpointers, opened from a URL.

    memory                          InMemorySaver (this process only)
    sqlite:///runs.sqlite           SqliteSaver; relative path (sqlite:////abs/path for absolute)
    runs.sqlite, /var/lib/runs.db   a plain path is SQLite too
    postgresql://user@host/db       PostgresSaver (the [postgres] extra), for many workers

A malformed or unreachable URL raises ``StoreError`` with one line naming the URL, password masked.
Every saver reads with ``serializer.serializer(allow)``: a stored value of any type but those a
run's state holds (and those named in ``allow``) is refused with ``UnsafeCheckpoint``, never
revived, so whoever can write the store cannot make a reader run code.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from gated_react.errors import StoreError, exception_line
from gated_react.redact import redact
from gated_react.store.key import KeyInput, StoreKey, store_key
from gated_react.store.postgres import apg_setup, pg_kwargs, pg_setup
from gated_react.store.serializer import AllowedType, GuardedSerializer, serializer
from gated_react.store.signed import signed

Kind = Literal["memory", "sqlite", "postgres"]
_PG_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
# In WAL mode (which the saver's setup turns on) NORMAL skips the fsync on every commit: a
# crashed or killed process loses nothing committed; only a power cut can lose the last commits.
_SYNCHRONOUS = "PRAGMA synchronous = NORMAL"
_PG_EXTRA = "Postgres support is not installed: pip install 'gated-react[postgres]'"


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed store URL."""

    kind: Kind
    target: str  # file path for sqlite, the libpq URL for postgres, "" for memory
    shown: str  # the URL with its password masked, for messages

    @classmethod
    def parse(cls, url: str) -> StoreURL:
        url = url.strip()
        shown = mask(url)
        if not url:
            raise StoreError("empty store URL; use memory, sqlite:///path or postgresql://...")
        if url == "memory":
            return cls("memory", "", shown)
        try:
            scheme = urlsplit(url).scheme.lower() if "://" in url else ""
        except ValueError as exc:  # e.g. "Invalid IPv6 URL": a bad URL is a StoreError too
            raise StoreError(f"store {shown}: {exc}") from None
        if scheme == "sqlite":
            path = url.split("://", 1)[1].removeprefix("/")
            if not path or path == ":memory:":
                raise StoreError(f"store {shown}: no file path (use sqlite:///path/runs.sqlite)")
            return cls("sqlite", path, shown)
        if scheme in _PG_SCHEMES:
            return cls("postgres", url.replace("postgresql+psycopg://", "postgresql://", 1), shown)
        if scheme:
            raise StoreError(f"store {shown}: unknown scheme {scheme!r} (use sqlite or postgresql)")
        return cls("sqlite", url, shown)


def mask(url: str) -> str:
    """The URL with any password replaced by ``***``."""
    return redact(url)


@contextmanager
def open_checkpointer(
    url: str,
    *,
    allow: Iterable[AllowedType] = (),
    key: KeyInput | StoreKey | None = None,
) -> Iterator[BaseCheckpointSaver[str]]:
    """A ready checkpointer for ``url`` (tables created on first use); closed on exit.
    ``allow``: your own types that your state stores (classes or ``(module, name)`` pairs);
    anything else that is not a type of LangGraph's, LangChain's messages or this package's state
    is refused on read (``UnsafeCheckpoint``). ``key``: the store key (or keys, the first signs,
    the others are older keys still read): every checkpoint and write is signed, and a row the
    key did not sign is refused on read (``UnsafeCheckpoint``); see ``gated_react.store.key``."""
    store, keys = StoreURL.parse(url), _key(key)
    serde = serializer(allow, keyed=keys is not None)
    if store.kind == "memory":
        yield signed(InMemorySaver(serde=serde), keys)
    elif store.kind == "sqlite":
        with _sqlite(store, serde) as saver:
            yield signed(saver, keys)
    else:
        with _postgres(store, serde) as saver:
            yield signed(saver, keys)


@asynccontextmanager
async def aopen_checkpointer(
    url: str,
    *,
    allow: Iterable[AllowedType] = (),
    key: KeyInput | StoreKey | None = None,
) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """The async twin: AsyncSqliteSaver or AsyncPostgresSaver, for ``ainvoke`` and servers,
    with what the LangGraph server asks of a custom checkpointer (``savers``). On Postgres it
    keeps a pool of connections checked before each use: a restarted server costs a reconnect."""
    store, keys = StoreURL.parse(url), _key(key)
    serde = serializer(allow, keyed=keys is not None)
    if store.kind == "memory":
        yield signed(InMemorySaver(serde=serde), keys)
    elif store.kind == "sqlite":
        async with _asqlite(store, serde) as saver:
            yield signed(saver, keys)
    else:
        async with _apostgres(store, serde) as saver:
            yield signed(saver, keys)


def _key(key: KeyInput | StoreKey | None) -> StoreKey | None:
    try:
        return store_key(key)
    except ValueError as exc:  # one line, never the key
        raise StoreError(str(exc)) from None


def sqlite_file(store: StoreURL) -> Path:
    """The SQLite file, its folders created: the embedded store works on first use. Anything
    but a regular file is refused before SQLite opens it: on ``/dev/null`` it would leave
    ``/dev/null-journal`` behind."""
    path = Path(store.target).expanduser()
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise StoreError(f"store {store.shown}: {path} is {kind}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"store {store.shown}: cannot create {path.parent}: {exc.strerror}"
        ) from None
    return path


def _cause(path: Path) -> str:
    """What SQLite's "unable to open database file" leaves out: a folder it cannot write in
    (in WAL mode even reading needs the ``-shm`` file there)."""
    try:
        read_only = bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return ""
    if read_only:
        return f" ({path.parent} is on a read-only file system)"
    return "" if os.access(path.parent, os.W_OK) else f" ({path.parent} is not writable)"


_SET_UP_WAITS = tuple(min(0.01 * (attempt + 1), 0.1) for attempt in range(200))
"""The waits between tries of a new SQLite store's set-up (about 19 s in all): processes
opening one new store at once can meet in SQLite's lock upgrade, which SQLite refuses at once
("database is locked") rather than wait on (it would deadlock), so it is tried again, as
SQLite's own busy wait would."""


def _set_up(setup: Callable[[], None]) -> None:
    for wait in _SET_UP_WAITS:
        try:
            setup()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
        time.sleep(wait)
    setup()  # the last try: its error is the store's


async def _aset_up(setup: Callable[[], Awaitable[None]]) -> None:
    for wait in _SET_UP_WAITS:
        try:
            await setup()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
        await asyncio.sleep(wait)
    await setup()


@contextmanager
def _sqlite(store: StoreURL, serde: GuardedSerializer) -> Iterator[BaseCheckpointSaver[str]]:
    from gated_react.store.savers import SyncSqliteStore

    path = sqlite_file(store)
    try:
        conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
    except sqlite3.Error as exc:
        raise StoreError(f"store {store.shown}: {exc}{_cause(path)}") from None
    try:  # closed on every exit, a failed setup included (no descriptor left behind)
        saver = SyncSqliteStore(conn, serde=serde)
        try:
            _set_up(saver.setup)
            conn.execute(_SYNCHRONOUS)
        except sqlite3.Error as exc:
            raise StoreError(f"store {store.shown}: {exc}{_cause(path)}") from None
        yield saver
    finally:
        conn.close()


@asynccontextmanager
async def _asqlite(
    store: StoreURL, serde: GuardedSerializer
) -> AsyncIterator[BaseCheckpointSaver[str]]:
    import aiosqlite

    from gated_react.store.savers import SqliteStore

    path = sqlite_file(store)
    try:
        conn = await aiosqlite.connect(path, timeout=30)
    except sqlite3.Error as exc:
        raise StoreError(f"store {store.shown}: {exc}{_cause(path)}") from None
    try:
        saver = SqliteStore(conn, serde=serde)
        try:
            await _aset_up(saver.setup)
            await conn.execute(_SYNCHRONOUS)
        except sqlite3.Error as exc:
            raise StoreError(f"store {store.shown}: {exc}{_cause(path)}") from None
        yield saver
    finally:
        await conn.close()


@contextmanager
def _postgres(store: StoreURL, serde: GuardedSerializer) -> Iterator[BaseCheckpointSaver[str]]:
    try:
        import psycopg

        from gated_react.store.savers import sync_postgres_store

        saver_type = sync_postgres_store()
    except ImportError:
        raise StoreError(_PG_EXTRA) from None
    try:
        conn = psycopg.connect(store.target, **pg_kwargs())
    except psycopg.Error as exc:
        raise _store_error(store, exc) from None
    with conn:  # closed on every exit, a failed setup included
        saver = saver_type(conn, serde=serde)
        try:
            pg_setup(conn, saver)
        except (psycopg.Error, TimeoutError) as exc:
            raise _store_error(store, exc) from None
        yield saver


POOL_SIZE = 10
"""Connections the async Postgres saver's pool holds at most: one per run that holds its
thread lock, and the saver's own statements, each on a connection only while it runs."""


@asynccontextmanager
async def _apostgres(
    store: StoreURL, serde: GuardedSerializer
) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """The async saver on a pool whose connections are checked before each use: a server that
    restarted, or closed a connection, costs a reconnect, not every later call (a server such
    as ``langgraph dev`` holds its saver for days). The tables are set up first on a connection
    of their own, which is also where an unreachable store is told, in one line."""
    try:
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        from gated_react.store.savers import postgres_store

        saver_type = postgres_store()
    except ImportError:
        raise StoreError(_PG_EXTRA) from None
    try:
        conn = await psycopg.AsyncConnection.connect(store.target, **pg_kwargs())
    except psycopg.Error as exc:
        raise _store_error(store, exc) from None
    async with conn:
        try:
            await apg_setup(conn, saver_type(conn, serde=serde))
        except (psycopg.Error, TimeoutError) as exc:
            raise _store_error(store, exc) from None
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        store.target,
        kwargs=pg_kwargs(),
        min_size=1,
        max_size=POOL_SIZE,
        check=AsyncConnectionPool.check_connection,
        open=False,
        name="gated-react-store",
    )
    await pool.open(wait=False)
    try:
        yield saver_type(pool, serde=serde)
    finally:
        await pool.close()


def _store_error(store: StoreURL, exc: BaseException) -> StoreError:
    return StoreError(f"store {store.shown}: {exception_line(exc, first_only=True)}")
