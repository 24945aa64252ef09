"""Reading what a store holds, for every host: a thread's rows this version cannot decode are
one line naming the thread, a store that fails in use is told apart from damage, and the
Postgres saver's connection is reached the same way by every listing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from gated_react.errors import GatedReactError, exception_line
from gated_react.records import RecordError

# Database drivers whose errors mean the run store itself failed while in use.
_STORE_DRIVERS = frozenset({"sqlite3", "psycopg", "psycopg_pool"})


@contextmanager
def readable(thread: str) -> Iterator[None]:
    """Reading what a thread stored: rows this version cannot decode (a damaged file, or rows
    written by another program) are a ``RecordError`` naming the thread; the store itself
    failing and our own errors pass through to their handlers. A value the serializer refused
    to revive (``gated_react.store.serializer``) names the thread too."""
    from gated_react.store.serializer import (
        UnsafeCheckpoint,  # the store is open: LangGraph is loaded
    )

    try:
        yield
    except UnsafeCheckpoint as exc:
        raise RecordError(
            f"thread {thread!r}: its stored checkpoint cannot be read: {exc}"
        ) from None
    except GatedReactError:
        raise
    except Exception as exc:
        if store_failure(exc) is not None:
            raise
        if isinstance(exc, UnicodeEncodeError) and not _utf8(thread):  # the id, not the store
            raise RecordError(
                f"thread {thread!r}: its id is not UTF-8 text (a byte the shell passed is no"
                " character), so no store holds it"
            ) from None
        name, why = type(exc).__name__, exception_line(exc, first_only=True)
        raise RecordError(
            f"thread {thread!r}: its stored checkpoint cannot be read "
            f"({name if why == name else f'{name}: {why}'}); the store is damaged or was "
            "written by another program or version"
        ) from None


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def store_failure(exc: BaseException) -> str | None:
    """One line for a store that failed in use (disk full, read-only file, lost connection);
    None for any other exception."""
    if type(exc).__module__.partition(".")[0] not in _STORE_DRIVERS:
        return None
    return exception_line(exc, first_only=True)


def pg_connection(saver: Any) -> AbstractContextManager[Any] | None:
    """The Postgres saver's connection, to enter (held under ``saver.lock``); None for any
    other saver. Its rows are dicts."""
    conn = getattr(saver, "conn", None)
    if not type(conn).__module__.startswith(("psycopg", "psycopg_pool")):
        return None
    return _pg(conn)


@contextmanager
def _pg(conn: Any) -> Iterator[Any]:
    """A connection from a psycopg connection or pool (PostgresSaver takes either)."""
    if hasattr(conn, "getconn"):  # a pool
        with conn.connection() as pooled:
            yield pooled
    else:
        yield conn
