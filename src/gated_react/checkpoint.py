"""LangGraph's own checkpointers, opened from a URL.

    memory                          InMemorySaver (this process only)
    sqlite:///runs.sqlite           SqliteSaver; relative path (sqlite:////abs/path for absolute)
    runs.sqlite, /var/lib/runs.db   a plain path is SQLite too
    postgresql://user@host/db       PostgresSaver (the [postgres] extra), for many workers

A malformed or unreachable URL raises ``StoreError`` with one line naming the URL, password masked.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from gated_react.redact import redact

Kind = Literal["memory", "sqlite", "postgres"]
_PG_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
# In WAL mode (which the saver's setup turns on) NORMAL skips the fsync on every commit: a
# crashed or killed process loses nothing committed; only a power cut can lose the last commits.
_SYNCHRONOUS = "PRAGMA synchronous = NORMAL"
_PG_EXTRA = "Postgres support is not installed: pip install 'gated-react[postgres]'"


class StoreError(Exception):
    """The run store cannot be opened; the message is one line and carries no password."""


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
def open_checkpointer(url: str) -> Iterator[BaseCheckpointSaver[str]]:
    """A ready checkpointer for ``url`` (tables created on first use); closed on exit."""
    store = StoreURL.parse(url)
    if store.kind == "memory":
        yield InMemorySaver()
    elif store.kind == "sqlite":
        with _sqlite(store) as saver:
            yield saver
    else:
        with _postgres(store) as saver:
            yield saver


@asynccontextmanager
async def aopen_checkpointer(url: str) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """The async twin: AsyncSqliteSaver or AsyncPostgresSaver, for ``ainvoke`` and servers."""
    store = StoreURL.parse(url)
    if store.kind == "memory":
        yield InMemorySaver()
    elif store.kind == "sqlite":
        async with _asqlite(store) as saver:
            yield saver
    else:
        async with _apostgres(store) as saver:
            yield saver


def sqlite_file(store: StoreURL) -> Path:
    """The SQLite file, its folders created: the embedded store works on first use."""
    path = Path(store.target).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"store {store.shown}: cannot create {path.parent}: {exc.strerror}"
        ) from None
    return path


@contextmanager
def _sqlite(store: StoreURL) -> Iterator[BaseCheckpointSaver[str]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = sqlite_file(store)
    try:
        conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
        saver = SqliteSaver(conn)
        saver.setup()
        conn.execute(_SYNCHRONOUS)
    except sqlite3.Error as exc:
        raise StoreError(f"store {store.shown}: {exc}") from None
    try:
        yield saver
    finally:
        conn.close()


@asynccontextmanager
async def _asqlite(store: StoreURL) -> AsyncIterator[BaseCheckpointSaver[str]]:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = sqlite_file(store)
    try:
        conn = await aiosqlite.connect(path, timeout=30)
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        await conn.execute(_SYNCHRONOUS)
    except sqlite3.Error as exc:
        raise StoreError(f"store {store.shown}: {exc}") from None
    try:
        yield saver
    finally:
        await conn.close()


def _pg_kwargs() -> dict[str, Any]:
    from psycopg.rows import dict_row

    # PostgresSaver needs these, or setup() fails on a fresh database (CREATE INDEX CONCURRENTLY).
    return {
        "autocommit": True,
        "row_factory": dict_row,
        "prepare_threshold": 0,
        "connect_timeout": 10,
    }


@contextmanager
def _postgres(store: StoreURL) -> Iterator[BaseCheckpointSaver[str]]:
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        raise StoreError(_PG_EXTRA) from None
    try:
        conn = psycopg.connect(store.target, **_pg_kwargs())
        saver = PostgresSaver(conn)
        saver.setup()
    except psycopg.Error as exc:
        raise StoreError(f"store {store.shown}: {_first_line(exc)}") from None
    try:
        yield saver
    finally:
        conn.close()


@asynccontextmanager
async def _apostgres(store: StoreURL) -> AsyncIterator[BaseCheckpointSaver[str]]:
    try:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        raise StoreError(_PG_EXTRA) from None
    try:
        conn = await psycopg.AsyncConnection.connect(store.target, **_pg_kwargs())
        saver = AsyncPostgresSaver(conn)
        await saver.setup()
    except psycopg.Error as exc:
        raise StoreError(f"store {store.shown}: {_first_line(exc)}") from None
    try:
        yield saver
    finally:
        await conn.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return redact(text[0] if text else type(exc).__name__)
