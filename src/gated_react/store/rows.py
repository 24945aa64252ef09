"""A store's rows as LangGraph's SQLite and Postgres savers keep them, and the run records kept
beside them (``RECORDS``), read and rewritten one row at a time (``signing``): which threads a
store holds, a thread's pending writes with their index and its records, and a checkpoint's tag,
a write's value or a record's signature set in place, only where it is still the one that was
read."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from gated_react.jsontext import json_object
from gated_react.store.key import TAG, VALUES

Write = tuple[str, str, str, int, str, tuple[str, bytes]]
"""A stored pending write: namespace, checkpoint id, task id, index, channel, (type, bytes)."""
RecordRow = tuple[int, str, str, str, str, dict[str, Any], float, str]
"""A stored run record: seq, thread, run, kind, key, body, when, signature (``mac``)."""

RECORDS = "gated_react_records"
"""The table of the run records (``_engine/authority/statements.py``), in the saver's own database.
A graph run as a subgraph keeps its records under ``<thread>|<namespace>``: ``owners``."""
_RECORD_ROWS = f"SELECT seq, thread_id, run, kind, key, body, at, mac FROM {RECORDS}"
Run = Callable[..., int]
"""Runs one of a dialect's statements in a transaction: ``run(dialect.set_write, ...)``."""
_OUTSIDE = [0]


def changed_outside() -> None:
    """Say that rows of ``RECORDS`` were changed through a saver's own SQLite connection by
    something other than the ledger's backend (a thread deleted, signatures rewritten): what
    a backend kept of its own rows (``_engine/authority/tail.py``) is read again from the table."""
    _OUTSIDE[0] += 1


def outside_changes() -> int:
    """How many times ``changed_outside`` was called in this process."""
    return _OUTSIDE[0]


class Dialect(Protocol):
    """The SQL of one kind of saver."""

    def threads(self, raw: Any) -> list[str]: ...

    def writes(self, raw: Any, thread: str) -> list[Write]: ...

    def transaction(self, raw: Any) -> AbstractContextManager[Run]: ...

    def set_metadata(
        self, conn: Any, where: tuple[str, str, str, str | None], metadata: dict[str, Any],
        old_tag: str | None,
    ) -> int: ...  # fmt: skip

    def set_write(
        self, conn: Any, key: tuple[Any, ...], old: tuple[str, bytes], new: tuple[str, bytes]
    ) -> int: ...

    def record_threads(self, raw: Any) -> list[str]:
        """The thread ids the store's records are kept under (none without the table)."""
        ...

    def records(self, raw: Any, thread: str) -> list[RecordRow]:
        """The records kept under ``thread``, in order."""
        ...

    def set_record(self, conn: Any, seq: int, old_mac: str, new_mac: str) -> int: ...


def record_body(text: str) -> dict[str, Any]:
    """A record's stored body; one that is not a JSON object, or not text (edited with SQL),
    reads as empty, and its record's signature then fails."""
    if not isinstance(text, str):
        return {}
    try:
        body = json_object(text)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def record_at(value: Any) -> float:
    """A record's stored time; one that is no number (edited with SQL) reads as 0.0, and its
    record's signature then fails."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)


def _record(row: Any) -> RecordRow:
    seq, thread, run, kind, key, body, at, mac = row.values() if isinstance(row, dict) else row
    return int(seq), thread, run, kind, key, record_body(body), record_at(at), str(mac)


def record_thread(thread: str, namespace: str = "") -> str:
    """The id a thread's records are kept under (``RECORDS.thread_id``): the thread's id with
    each ``|`` doubled, and for a graph it ran as a subgraph, ``|`` and the nodes it is nested
    in (a namespace never starts with ``|``). A thread id may hold ``|``: doubled, it never
    names another thread's subgraph (``thread_of`` reads it back)."""
    kept = thread.replace("|", "||")
    return f"{kept}|{namespace}" if namespace else kept


def thread_of(record_thread: str) -> str:
    """The thread whose records ``record_thread`` names (``record_thread``'s inverse)."""
    at = record_thread.find("|")
    while at >= 0 and record_thread.startswith("||", at):
        at = record_thread.find("|", at + 2)
    head = record_thread if at < 0 else record_thread[:at]
    return head.replace("||", "|")


def parts_of(threads: Sequence[str], mark: str, column: str = "thread_id") -> tuple[str, list[Any]]:
    """A ``WHERE`` clause on ``column`` for the record threads that may be ``threads``' own or
    their subgraphs' (``owned`` tells which are), and its parameters (``mark``: ``?`` or
    ``%s``)."""
    kept = [record_thread(thread) for thread in threads]
    starts = f"substr({column}, 1, {mark}) = {mark}"
    clause = f"{column} IN ({', '.join([mark] * len(kept))}) OR {' OR '.join([starts] * len(kept))}"
    return clause, [*kept, *(arg for k in kept for arg in (len(k) + 1, f"{k}|"))]


def owned(found: Iterable[str], threads: Collection[str]) -> dict[str, str]:
    """Of the record threads ``found``, each that is one of ``threads``' own or its
    subgraphs', with its thread."""
    return {part: owner for part in found if (owner := thread_of(part)) in threads}


def owners(threads: Iterable[str], record_threads: Iterable[str]) -> dict[str, list[str]]:
    """The record threads of each thread (its own, its subgraphs'), and of each thread the
    records name that ``threads`` does not hold (a thread deleted, its records left)."""
    found: dict[str, list[str]] = {thread: [] for thread in threads}
    for held in record_threads:
        found.setdefault(thread_of(held), []).append(held)
    return found


class _Sqlite:
    _THREADS = "SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM writes ORDER BY 1"
    _WRITES = (
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value FROM writes"
        " WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id, task_id, idx"
    )
    _METADATA = (
        "UPDATE checkpoints SET metadata = ? WHERE thread_id = ? AND checkpoint_ns = ?"
        f" AND checkpoint_id = ? AND json_extract(CAST(metadata AS TEXT), '$.{TAG}') IS ?"
    )
    _WRITE = (
        "UPDATE writes SET type = ?, value = ? WHERE thread_id = ? AND checkpoint_ns = ?"
        " AND checkpoint_id = ? AND task_id = ? AND idx = ? AND type IS ? AND value = ?"
    )

    def threads(self, raw: Any) -> list[str]:
        with raw.lock:
            return [row[0] for row in raw.conn.execute(self._THREADS)]

    def writes(self, raw: Any, thread: str) -> list[Write]:
        with raw.lock:
            rows = raw.conn.execute(self._WRITES, (thread,)).fetchall()
        return [(r[0], r[1], r[2], int(r[3]), r[4], (r[5], r[6])) for r in rows]

    @contextmanager
    def transaction(self, raw: Any) -> Iterator[Run]:
        conn = raw.conn
        with raw.lock:
            changed_outside()
            try:
                yield lambda statement, *args: statement(conn, *args)
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    def set_metadata(
        self, conn: Any, where: tuple[str, str, str, str | None], metadata: dict[str, Any],
        old_tag: str | None,
    ) -> int:  # fmt: skip
        text = json.dumps(metadata, ensure_ascii=False)  # as SqliteSaver writes it
        return int(conn.execute(self._METADATA, (text, *where[:3], old_tag)).rowcount)

    def set_write(
        self, conn: Any, key: tuple[Any, ...], old: tuple[str, bytes], new: tuple[str, bytes]
    ) -> int:
        return int(conn.execute(self._WRITE, (*new, *key, *old)).rowcount)

    _HAS_RECORDS = f"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '{RECORDS}'"

    def record_threads(self, raw: Any) -> list[str]:
        with raw.lock:
            if not raw.conn.execute(self._HAS_RECORDS).fetchone()[0]:
                return []
            rows = raw.conn.execute(f"SELECT DISTINCT thread_id FROM {RECORDS} ORDER BY 1")
            return [row[0] for row in rows]

    def records(self, raw: Any, thread: str) -> list[RecordRow]:
        with raw.lock:
            rows = raw.conn.execute(f"{_RECORD_ROWS} WHERE thread_id = ? ORDER BY seq", (thread,))
            return [_record(row) for row in rows.fetchall()]

    def set_record(self, conn: Any, seq: int, old_mac: str, new_mac: str) -> int:
        statement = f"UPDATE {RECORDS} SET mac = ? WHERE seq = ? AND mac = ?"
        return int(conn.execute(statement, (new_mac, seq, old_mac)).rowcount)


class _Postgres:
    _THREADS = (
        "SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM checkpoint_writes ORDER BY 1"
    )
    _WRITES = (
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob"
        " FROM checkpoint_writes WHERE thread_id = %s"
        " ORDER BY checkpoint_ns, checkpoint_id, task_id, idx"
    )
    # Only the tag and the digest change; every other key of the metadata stays as stored.
    _METADATA = (
        f"UPDATE checkpoints SET metadata = (metadata - '{TAG}' - '{VALUES}') || %s"
        " WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
        f" AND (metadata ->> '{TAG}') IS NOT DISTINCT FROM %s"
    )
    _WRITE = (
        "UPDATE checkpoint_writes SET type = %s, blob = %s WHERE thread_id = %s"
        " AND checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s AND idx = %s"
        " AND type IS NOT DISTINCT FROM %s AND blob = %s"
    )

    def threads(self, raw: Any) -> list[str]:
        with raw.lock, _pg(raw.conn) as conn:
            return [row["thread_id"] for row in conn.execute(self._THREADS).fetchall()]

    def writes(self, raw: Any, thread: str) -> list[Write]:
        with raw.lock, _pg(raw.conn) as conn:
            rows = conn.execute(self._WRITES, (thread,)).fetchall()
        return [
            (r["checkpoint_ns"], r["checkpoint_id"], r["task_id"], int(r["idx"]), r["channel"],
             (r["type"], bytes(r["blob"])))
            for r in rows
        ]  # fmt: skip

    @contextmanager
    def transaction(self, raw: Any) -> Iterator[Run]:
        with raw.lock, _pg(raw.conn) as conn, conn.transaction():
            yield lambda statement, *args: statement(conn, *args)

    def set_metadata(
        self, conn: Any, where: tuple[str, str, str, str | None], metadata: dict[str, Any],
        old_tag: str | None,
    ) -> int:  # fmt: skip
        from psycopg.types.json import Jsonb

        fields = Jsonb({TAG: metadata[TAG], VALUES: metadata[VALUES]})
        return int(conn.execute(self._METADATA, (fields, *where[:3], old_tag)).rowcount)

    def set_write(
        self, conn: Any, key: tuple[Any, ...], old: tuple[str, bytes], new: tuple[str, bytes]
    ) -> int:
        return int(conn.execute(self._WRITE, (*new, *key, *old)).rowcount)

    def record_threads(self, raw: Any) -> list[str]:
        with raw.lock, _pg(raw.conn) as conn:
            if not conn.execute(f"SELECT to_regclass('{RECORDS}') AS t").fetchone()["t"]:
                return []
            rows = conn.execute(f"SELECT DISTINCT thread_id FROM {RECORDS} ORDER BY 1")
            return [row["thread_id"] for row in rows.fetchall()]

    def records(self, raw: Any, thread: str) -> list[RecordRow]:
        with raw.lock, _pg(raw.conn) as conn:
            rows = conn.execute(f"{_RECORD_ROWS} WHERE thread_id = %s ORDER BY seq", (thread,))
            return [_record(row) for row in rows.fetchall()]

    def set_record(self, conn: Any, seq: int, old_mac: str, new_mac: str) -> int:
        statement = f"UPDATE {RECORDS} SET mac = %s WHERE seq = %s AND mac = %s"
        return int(conn.execute(statement, (new_mac, seq, old_mac)).rowcount)


@contextmanager
def _pg(conn: Any) -> Iterator[Any]:
    """A connection from a psycopg connection or pool (PostgresSaver takes either)."""
    if hasattr(conn, "getconn"):
        with conn.connection() as pooled:
            yield pooled
    else:
        yield conn


def dialect(raw: Any) -> Dialect | None:
    """The SQL of ``raw``'s store: a sync SQLite or Postgres saver; None for any other."""
    conn = getattr(raw, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        return _Sqlite()
    if type(conn).__module__.partition(".")[0] in ("psycopg", "psycopg_pool") and not type(
        conn
    ).__name__.startswith("Async"):
        return _Postgres()
    return None
