"""The statements behind records in a saver's database, for SQLite and Postgres alike: the
table and its indexes, and each backend method as a ``Plan`` (statements run in order, in one
transaction when it writes, and what their rows come to). ``sql`` runs them on each saver.

Every write commits at once; a ``started`` record is claimed by a partial unique index, so two
processes never both claim a call. On Postgres a writing transaction first takes a lock on its
thread, held until it commits, so a record numbered later in a thread never commits before one
numbered earlier (SQLite has one writer at a time already): a reader asking for what came after
the last record it read misses nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gated_react._engine.authority.records import Kind, Record
from gated_react.store.key import record_text
from gated_react.store.rows import RECORDS, record_at, record_body

TABLE = RECORDS
T = TypeVar("T")
Step = tuple[str, tuple[Any, ...], bool]
"""A statement, its parameters, and whether its rows are read."""

_COLUMNS = "thread_id, run, kind, key, call_id, body, at, mac"
_READ = f"SELECT seq, {_COLUMNS} FROM {TABLE}"
_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (seq {{seq}}, thread_id TEXT NOT NULL, run TEXT NOT NULL,"
    " kind TEXT NOT NULL, key TEXT NOT NULL, call_id TEXT, body TEXT NOT NULL,"
    " at {real} NOT NULL, mac TEXT NOT NULL)",
    # A thread's records in order, with their run: a read of a run's records from a point
    # walks the thread's index from there (reads are incremental) and needs no row to filter.
    f"CREATE INDEX IF NOT EXISTS {TABLE}_thread_seq ON {TABLE} (thread_id, seq, run)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_key ON {TABLE} (key)",
    # Model calls' records have no call id: none of them is indexed (an index written is a
    # page more for every commit to write).
    f"CREATE INDEX IF NOT EXISTS {TABLE}_call ON {TABLE} (call_id) WHERE call_id IS NOT NULL",
    f"CREATE UNIQUE INDEX IF NOT EXISTS {TABLE}_started ON {TABLE} (key) WHERE kind = 'started'",
)
_INSERT = f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
# Two-key advisory locks: (1735549284, n) are this package's set-up locks (checkpointer.py,
# workers/queue.py); a thread's lock has a class of its own, so no thread's hash meets them.
_PG_SETUP_LOCK = "SELECT pg_advisory_xact_lock(1735549284, 3)"
_PG_THREAD_LOCK = "SELECT pg_advisory_xact_lock(1735549285, %s::integer)"


@dataclass(frozen=True, slots=True)
class Dialect:
    """One database's statements (the same for its sync and async savers)."""

    exists: str
    create: tuple[str, ...]
    thread_lock: str | None
    insert: str
    claim: str
    after: str
    thread_after: str
    last_run: str
    first: str
    forget: str
    among: Callable[[int], str]
    """How ``about`` compares a column with n keys."""
    keys: Callable[[list[str]], tuple[Any, ...]]
    """Keys as the parameters of one such comparison."""

    @classmethod
    def made(
        cls, *, mark: str, seq: str, real: str, setup: tuple[str, ...], **rest: Any
    ) -> Dialect:
        def sql(text: str) -> str:
            return text.replace("%s", mark)

        return cls(
            create=(*setup, *(sql(s.format(seq=seq, real=real)) for s in _CREATE)),
            insert=sql(f"{_INSERT} RETURNING seq"),
            claim=sql(f"{_INSERT} ON CONFLICT DO NOTHING RETURNING seq"),
            after=sql(f"{_READ} WHERE thread_id = %s AND run = %s AND seq > %s ORDER BY seq"),
            thread_after=sql(f"{_READ} WHERE thread_id = %s AND seq > %s ORDER BY seq"),
            last_run=sql(f"SELECT run FROM {TABLE} WHERE thread_id = %s ORDER BY seq DESC LIMIT 1"),
            first=sql(f"SELECT min(seq) FROM {TABLE} WHERE thread_id = %s"),
            forget=sql(f"DELETE FROM {TABLE} WHERE thread_id = %s RETURNING seq"),
            **rest,
        )


_MARKS = 64
"""Keys compared as parameters of their own (a statement per count, each kept by sqlite3's
statement cache; a JSON list costs SQLite half as much again); more go as one JSON list."""
_JSON_KEYS = "IN (SELECT value FROM json_each(?))"

SQLITE = Dialect.made(
    mark="?",
    seq="INTEGER PRIMARY KEY AUTOINCREMENT",  # never reused, even after the newest row goes
    real="REAL",
    among=lambda n: f"IN ({','.join('?' * n)})" if n <= _MARKS else _JSON_KEYS,
    setup=(),  # BEGIN IMMEDIATE: one creator at a time
    exists=f"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '{TABLE}'",
    thread_lock=None,  # one writer at a time already
    keys=lambda keys: tuple(keys) if len(keys) <= _MARKS else (json.dumps(keys),),
)
POSTGRES = Dialect.made(
    mark="%s",
    seq="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    real="DOUBLE PRECISION",
    among=lambda _: "= ANY(%s)",
    setup=(_PG_SETUP_LOCK,),  # concurrent CREATE ... IF NOT EXISTS can fail on Postgres
    exists=f"SELECT to_regclass('{TABLE}') IS NOT NULL",
    thread_lock=_PG_THREAD_LOCK,
    keys=lambda keys: (keys,),
)


@dataclass(frozen=True, slots=True)
class Plan(Generic[T]):
    """What one method does, in either mode: statements run in order (in one transaction,
    committed at once, when ``write``), and what the rows of those that are read come to."""

    name: str
    steps: tuple[Step, ...]
    answer: Callable[[list[list[Any]]], T]
    write: bool = False
    place: tuple[str, str | None, int] | None = None
    """For a read of a run's records after a ``seq``: the thread, the run and the ``seq``."""
    records: tuple[Record, ...] = ()
    """For an insert: the records its steps insert, in order."""


def _values(row: Any) -> tuple[Any, ...]:
    """A row's values in column order (the Postgres savers' cursors make dicts, SQLite tuples)."""
    if type(row) is tuple:  # SQLite's rows; checked first: a Mapping check costs far more
        return row
    return tuple(row.values()) if isinstance(row, Mapping) else tuple(row)


def _first(rows: list[Any]) -> Any:
    return _values(rows[0])[0] if rows else None


def _stored(record: Record) -> tuple[Any, ...]:
    call = record.body.get("call")
    call = call if isinstance(call, str) else None  # what ``about`` finds a record by too
    body = record.text or record_text(record.body)
    return (record.thread, record.run, record.kind.value, record.key, call, body,
            float(record.at), record.mac)  # fmt: skip


_KINDS = {kind.value: kind for kind in Kind}


def _records(rows: list[Any]) -> list[Record]:
    found = []
    for row in rows:
        seq, thread, run, kind, key, _, text, at, mac = _values(row)
        known = _KINDS.get(kind)
        if known is not None:  # a kind this version does not know says nothing it could act on
            text = text if isinstance(text, str) else ""
            found.append(Record(thread, run, known, key, record_body(text), record_at(at), mac,
                                seq, False, text))  # fmt: skip
    return found


def _locks(dialect: Dialect, threads: Sequence[str]) -> tuple[Step, ...]:
    """The thread locks a write takes, in one order (two writers never wait on each other)."""
    if dialect.thread_lock is None:
        return ()
    keys = sorted({_thread_key(thread) for thread in threads})
    return tuple((dialect.thread_lock, (key,), False) for key in keys)


def _thread_key(thread: str) -> int:
    digest = hashlib.sha256(thread.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def insert(d: Dialect, records: Sequence[Record]) -> Plan[list[int]]:
    stores = tuple((d.insert, _stored(record), True) for record in records)
    steps = (*_locks(d, [record.thread for record in records]), *stores)
    return Plan("insert", steps, _seqs, write=True, records=tuple(records))


def _seqs(rows: list[list[Any]]) -> list[int]:
    return [int(_first(found)) for found in rows]


def claim(d: Dialect, record: Record) -> Plan[int | None]:
    steps = (*_locks(d, [record.thread]), (d.claim, _stored(record), True))
    return Plan("claim", steps, _one(int), write=True, records=(record,))


def _one(cast: Callable[[Any], T]) -> Callable[[list[list[Any]]], T | None]:
    """The answer of a plan that reads one value: the first row's, cast, or None."""

    def answer(rows: list[list[Any]]) -> T | None:
        found = _first(rows[0])
        return None if found is None else cast(found)

    return answer


def read(
    name: str, sql: str, args: tuple[Any, ...], place: tuple[str, str | None, int] | None = None
) -> Plan[list[Record]]:
    return Plan(name, ((sql, args, True),), lambda rows: _records(rows[0]), place=place)


def after(d: Dialect, thread: str, run: str | None, seq: int) -> Plan[list[Record]]:
    if not run:  # every run's of the thread
        return read("after", d.thread_after, (thread, seq), (thread, None, seq))
    return read("after", d.after, (thread, run, seq), (thread, run, seq))


def about(d: Dialect, keys: Sequence[str]) -> Plan[list[Record]]:
    unique = list(dict.fromkeys(keys))
    if not unique:
        return Plan("about", (), lambda _: [])
    return read("about", _about_sql(d, len(unique)), (*d.keys(unique), *d.keys(unique)))


@functools.lru_cache(maxsize=64)
def _about_sql(d: Dialect, count: int) -> str:
    return f"{_READ} WHERE key {d.among(count)} OR call_id {d.among(count)} ORDER BY seq"


def last_run(d: Dialect, thread: str) -> Plan[str | None]:
    return Plan("last_run", ((d.last_run, (thread,), True),), _one(str))


def first(d: Dialect, thread: str) -> Plan[int | None]:
    return Plan("first", ((d.first, (thread,), True),), _one(int))


def forget(d: Dialect, thread: str) -> Plan[int]:
    return Plan("forget", ((d.forget, (thread,), True),), lambda rows: len(rows[0]), write=True)


def exists(d: Dialect) -> Plan[bool]:
    return Plan("setup", ((d.exists, (), True),), lambda rows: bool(_first(rows[0])))


def create(d: Dialect) -> Plan[None]:
    return Plan("setup", tuple((sql, (), False) for sql in d.create), lambda _: None, True)
