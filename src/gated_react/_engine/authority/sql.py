"""Records in the run's own database: one table (``gated_react_records``) beside the checkpoints
of a SQLite or Postgres saver, LangGraph's own or a subclass, reached through the saver's own
connection and lock (a worker's one pooled connection, and the session locks on it, included).

Every write commits at once; a ``started`` record is claimed by a partial unique index, so two
processes never both claim a call. A reader asks for a run's records after the last one it
read (``after``), so a run's records must become visible in ``seq`` order: SQLite has one writer
at a time; on Postgres a writing transaction holds a lock on the thread until it commits, so a
record numbered later in a thread never commits before one numbered earlier.

A saver is used in one mode: a sync saver's backend refuses the async methods and an async
saver's the sync ones (``RuntimeError``). Nothing here imports a database driver: a saver's
class is matched only if its module is already loaded.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gated_react._engine.authority.records import Kind, Record
from gated_react.store.key import record_text
from gated_react.store.rows import RECORDS, record_body

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
    f"CREATE INDEX IF NOT EXISTS {TABLE}_run ON {TABLE} (thread_id, run, seq)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_key ON {TABLE} (key)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_call ON {TABLE} (call_id)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_thread ON {TABLE} (thread_id, seq)",
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
    last_run: str
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
            last_run=sql(f"SELECT run FROM {TABLE} WHERE thread_id = %s ORDER BY seq DESC LIMIT 1"),
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
            found.append(Record(thread, run, known, key, record_body(text), at, mac, seq,
                                False, text))  # fmt: skip
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


def _insert(d: Dialect, records: Sequence[Record]) -> Plan[list[int]]:
    stores = tuple((d.insert, _stored(record), True) for record in records)
    steps = (*_locks(d, [record.thread for record in records]), *stores)
    return Plan("insert", steps, lambda rows: [int(_first(found)) for found in rows], write=True)


def _claim(d: Dialect, record: Record) -> Plan[int | None]:
    steps = (*_locks(d, [record.thread]), (d.claim, _stored(record), True))
    return Plan("claim", steps, _one(int), write=True)


def _one(cast: Callable[[Any], T]) -> Callable[[list[list[Any]]], T | None]:
    """The answer of a plan that reads one value: the first row's, cast, or None."""

    def answer(rows: list[list[Any]]) -> T | None:
        found = _first(rows[0])
        return None if found is None else cast(found)

    return answer


def _read(name: str, sql: str, args: tuple[Any, ...]) -> Plan[list[Record]]:
    return Plan(name, ((sql, args, True),), lambda rows: _records(rows[0]))


def _about(d: Dialect, keys: Sequence[str]) -> Plan[list[Record]]:
    unique = list(dict.fromkeys(keys))
    if not unique:
        return Plan("about", (), lambda _: [])
    return _read("about", _about_sql(d, len(unique)), (*d.keys(unique), *d.keys(unique)))


@functools.lru_cache(maxsize=64)
def _about_sql(d: Dialect, count: int) -> str:
    return f"{_READ} WHERE key {d.among(count)} OR call_id {d.among(count)} ORDER BY seq"


def _last_run(d: Dialect, thread: str) -> Plan[str | None]:
    return Plan("last_run", ((d.last_run, (thread,), True),), _one(str))


def _forget(d: Dialect, thread: str) -> Plan[int]:
    return Plan("forget", ((d.forget, (thread,), True),), lambda rows: len(rows[0]), write=True)


def _exists(d: Dialect) -> Plan[bool]:
    return Plan("setup", ((d.exists, (), True),), lambda rows: bool(_first(rows[0])))


def _create(d: Dialect) -> Plan[None]:
    return Plan("setup", tuple((sql, (), False) for sql in d.create), lambda _: None, True)


class SqlBackend:
    """Records in a table of ``saver``'s database: the ``Backend`` of ``ledger``, in the mode
    of its saver. Each method is a ``Plan``, run by the subclass of the saver's kind."""

    dialect: Dialect
    synchronous: bool

    def __init__(self, saver: Any, kind: Any) -> None:
        self.saver = saver
        self._kind = kind  # LangGraph's class the saver is (or subclasses)
        self._ready = False  # the table is known to exist (checked under the saver's lock)

    def insert(self, records: Sequence[Record]) -> list[int]:
        return self._run(_insert(self.dialect, records))

    def claim(self, record: Record) -> int | None:
        return self._run(_claim(self.dialect, record))

    def after(self, thread: str, run: str, seq: int) -> list[Record]:
        return self._run(_read("after", self.dialect.after, (thread, run, seq)))

    def about(self, keys: Sequence[str]) -> list[Record]:
        return self._run(_about(self.dialect, keys))

    def last_run(self, thread: str) -> str | None:
        return self._run(_last_run(self.dialect, thread))

    def forget(self, thread: str) -> int:
        """Delete a thread's records (a deleted thread); how many went."""
        return self._run(_forget(self.dialect, thread))

    async def ainsert(self, records: Sequence[Record]) -> list[int]:
        return await self._arun(_insert(self.dialect, records))

    async def aclaim(self, record: Record) -> int | None:
        return await self._arun(_claim(self.dialect, record))

    async def aafter(self, thread: str, run: str, seq: int) -> list[Record]:
        return await self._arun(_read("after", self.dialect.after, (thread, run, seq)))

    async def aabout(self, keys: Sequence[str]) -> list[Record]:
        return await self._arun(_about(self.dialect, keys))

    async def alast_run(self, thread: str) -> str | None:
        return await self._arun(_last_run(self.dialect, thread))

    async def aforget(self, thread: str) -> int:
        return await self._arun(_forget(self.dialect, thread))

    def _run(self, plan: Plan[T]) -> T:
        if not self.synchronous:
            name = type(self.saver).__name__
            raise RuntimeError(f"{name} is async: use await a{plan.name}(), not {plan.name}()")
        return plan.answer([]) if not plan.steps else self._sync(plan)

    async def _arun(self, plan: Plan[T]) -> T:
        if self.synchronous:
            name = type(self.saver).__name__
            raise RuntimeError(f"{name} is sync: use {plan.name}(), not a{plan.name}()")
        return plan.answer([]) if not plan.steps else await self._async(plan)

    def _sync(self, plan: Plan[T]) -> T:
        raise NotImplementedError

    async def _async(self, plan: Plan[T]) -> T:
        raise NotImplementedError

    def _prepare(self, run: Callable[[Plan[Any]], Any]) -> None:
        """Create the table on first use (the saver's lock held)."""
        if not self._ready:
            if not run(_exists(self.dialect)):
                run(_create(self.dialect))
            self._ready = True

    async def _aprepare(self, run: Callable[[Plan[Any]], Any]) -> None:
        if not self._ready:
            if not await run(_exists(self.dialect)):
                await run(_create(self.dialect))
            self._ready = True


class SqliteBackend(SqlBackend):
    """Beside a ``SqliteSaver``: its ``sqlite3`` connection, under its thread lock."""

    dialect, synchronous = SQLITE, True

    def _sync(self, plan: Plan[T]) -> T:
        with self.saver.lock:
            conn = self.saver.conn
            self._prepare(lambda p: _sqlite(conn, p))
            return _sqlite(conn, plan)


class AsyncSqliteBackend(SqlBackend):
    """Beside an ``AsyncSqliteSaver``: its ``aiosqlite`` connection, under its asyncio lock."""

    dialect, synchronous = SQLITE, False

    async def _async(self, plan: Plan[T]) -> T:
        async with self.saver.lock:
            conn = self.saver.conn
            await self._aprepare(lambda p: _asqlite(conn, p))
            return await _asqlite(conn, plan)


class PostgresBackend(SqlBackend):
    """Beside a ``PostgresSaver``: a cursor of LangGraph's ``PostgresSaver._cursor`` (its lock,
    its connection or a connection of its pool). The base class's, not a subclass's: a subclass
    may hold its writes back (``CoalescedPostgresSaver`` does, and flushes them before a read);
    records are committed at once and never make the saver flush."""

    dialect, synchronous = POSTGRES, True

    def _sync(self, plan: Plan[T]) -> T:
        with self._kind._cursor(self.saver) as cur:
            self._prepare(lambda p: _postgres(cur, p))
            return _postgres(cur, plan)


class AsyncPostgresBackend(SqlBackend):
    """Beside an ``AsyncPostgresSaver``: as ``PostgresBackend``, with its async cursor."""

    dialect, synchronous = POSTGRES, False

    async def _async(self, plan: Plan[T]) -> T:
        async with self._kind._cursor(self.saver) as cur:
            await self._aprepare(lambda p: _apostgres(cur, p))
            return await _apostgres(cur, plan)


def _sqlite(conn: Any, plan: Plan[T]) -> T:
    if plan.write and not conn.in_transaction:
        conn.execute("BEGIN IMMEDIATE")  # the write lock first: a busy database is waited for
    try:
        rows = []
        for sql, args, read in plan.steps:
            cur = conn.execute(sql, args)
            if read:
                rows.append(cur.fetchall())
        if plan.write:
            conn.commit()
    except BaseException:
        if plan.write:
            conn.rollback()
        raise
    return plan.answer(rows)


async def _asqlite(conn: Any, plan: Plan[T]) -> T:
    if plan.write and not conn.in_transaction:
        await conn.execute("BEGIN IMMEDIATE")
    try:
        rows = []
        for sql, args, read in plan.steps:
            async with conn.execute(sql, args) as cur:
                if read:
                    rows.append(list(await cur.fetchall()))
        if plan.write:
            await conn.commit()
    except BaseException:
        if plan.write:
            await conn.rollback()
        raise
    return plan.answer(rows)


def _postgres(cur: Any, plan: Plan[T]) -> T:
    with cur.connection.transaction() if plan.write else nullcontext():
        rows = []
        for sql, args, read in plan.steps:
            cur.execute(sql, args)
            if read:
                rows.append(cur.fetchall())
    return plan.answer(rows)


async def _apostgres(cur: Any, plan: Plan[T]) -> T:
    async with cur.connection.transaction() if plan.write else nullcontext():
        rows = []
        for sql, args, read in plan.steps:
            await cur.execute(sql, args)
            if read:
                rows.append(await cur.fetchall())
    return plan.answer(rows)


_SAVERS: tuple[tuple[str, str, type[SqlBackend]], ...] = (
    ("langgraph.checkpoint.sqlite", "SqliteSaver", SqliteBackend),
    ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver", AsyncSqliteBackend),
    ("langgraph.checkpoint.postgres", "PostgresSaver", PostgresBackend),
    ("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver", AsyncPostgresBackend),
)


def backend_for(saver: Any) -> SqlBackend | None:
    """The backend that stores records beside ``saver``'s checkpoints (a LangGraph SQLite or
    Postgres saver, or a subclass), or None: any other saver keeps them in memory. The savers'
    classes are looked up only in modules already imported: no saver of a class whose module
    was never imported can exist, and nothing is imported for one that is not used."""
    for module, name, backend in _SAVERS:
        kind = getattr(sys.modules.get(module), name, None)
        if isinstance(kind, type) and isinstance(saver, kind):
            return backend(saver, kind)
    return None
