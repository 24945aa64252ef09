"""Records in the run's own database: one table (``gated_react_records``) beside the checkpoints
of a SQLite or Postgres saver, LangGraph's own or a subclass, reached through the saver's own
connection and lock (a worker's one pooled connection, and the session locks on it, included).
What is run is ``statements``'; how, on each kind of saver, is here.

A saver is used in one mode: a sync saver's backend refuses the async methods and an async
saver's the sync ones (``RuntimeError``). Nothing here imports a database driver: a saver's
class is matched only if its module is already loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from gated_react._engine.authority import statements as plans
from gated_react._engine.authority.records import Record
from gated_react._engine.authority.statements import POSTGRES, SQLITE, Dialect, Plan
from gated_react._engine.authority.tail import VERSION, Sharing, Tail, sharing

T = TypeVar("T")


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
        return self._run(plans.insert(self.dialect, records))

    def claim(self, record: Record) -> int | None:
        return self._run(plans.claim(self.dialect, record))

    def after(self, thread: str, run: str | None, seq: int) -> list[Record]:
        return self._run(plans.after(self.dialect, thread, run, seq))

    def about(self, keys: Sequence[str]) -> list[Record]:
        return self._run(plans.about(self.dialect, keys))

    def last_run(self, thread: str) -> str | None:
        return self._run(plans.last_run(self.dialect, thread))

    def first(self, thread: str) -> int | None:
        return self._run(plans.first(self.dialect, thread))

    def forget(self, thread: str) -> int:
        """Delete a thread's records (a deleted thread); how many went."""
        return self._run(plans.forget(self.dialect, thread))

    async def ainsert(self, records: Sequence[Record]) -> list[int]:
        return await self._arun(plans.insert(self.dialect, records))

    async def aclaim(self, record: Record) -> int | None:
        return await self._arun(plans.claim(self.dialect, record))

    async def aafter(self, thread: str, run: str | None, seq: int) -> list[Record]:
        return await self._arun(plans.after(self.dialect, thread, run, seq))

    async def aabout(self, keys: Sequence[str]) -> list[Record]:
        return await self._arun(plans.about(self.dialect, keys))

    async def alast_run(self, thread: str) -> str | None:
        return await self._arun(plans.last_run(self.dialect, thread))

    async def afirst(self, thread: str) -> int | None:
        return await self._arun(plans.first(self.dialect, thread))

    async def aforget(self, thread: str) -> int:
        return await self._arun(plans.forget(self.dialect, thread))

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
            if not run(plans.exists(self.dialect)):
                run(plans.create(self.dialect))
            self._ready = True

    async def _aprepare(self, run: Callable[[Plan[Any]], Any]) -> None:
        if not self._ready:
            if not await run(plans.exists(self.dialect)):
                await run(plans.create(self.dialect))
            self._ready = True


class _Tailed(SqlBackend):
    """A SQLite backend: a run's records it wrote itself read back from its ``Tail``, while
    no other backend uses its connection."""

    def __init__(self, saver: Any, kind: Any) -> None:
        super().__init__(saver, kind)
        self.tail = Tail()
        self._sharing: tuple[int, Sharing] | None = None

    def _tail(self, conn: Any) -> Tail | None:
        if self._sharing is None or self._sharing[0] != id(conn):
            self._sharing = (id(conn), sharing(conn, self))
        return None if self._sharing[1].shared else self.tail


class SqliteBackend(_Tailed):
    """Beside a ``SqliteSaver``: its ``sqlite3`` connection, under its thread lock."""

    dialect, synchronous = SQLITE, True

    def _sync(self, plan: Plan[T]) -> T:
        with self.saver.lock:
            conn = self.saver.conn
            tail = self._tail(conn)
            self._prepare(lambda p: _sqlite(conn, p, tail))
            return _sqlite(conn, plan, tail)


class AsyncSqliteBackend(_Tailed):
    """Beside an ``AsyncSqliteSaver``: its ``aiosqlite`` connection, under its asyncio lock."""

    dialect, synchronous = SQLITE, False

    async def _async(self, plan: Plan[T]) -> T:
        async with self.saver.lock:
            conn = self.saver.conn
            tail = self._tail(conn)
            await self._aprepare(lambda p: _asqlite(conn, p, tail))
            return await _asqlite(conn, plan, tail)


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


def _sqlite(conn: Any, plan: Plan[T], tail: Tail | None) -> T:
    if tail is None:
        return plan.answer(_sqlite_rows(conn, plan))
    # a read of a run's records from where the last one stopped: is it in the tail?
    version = conn.execute(VERSION).fetchone()[0] if plan.place is not None else None
    kept = tail.kept(plan, version)
    if kept is not None:
        return cast(T, kept)
    with tail.going(plan, version) as saw:
        rows = saw(_sqlite_rows(conn, plan))
    return plan.answer(rows)


def _sqlite_rows(conn: Any, plan: Plan[Any]) -> list[list[Any]]:
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
    return rows


async def _asqlite(conn: Any, plan: Plan[T], tail: Tail | None) -> T:
    if tail is None:
        return plan.answer(await _asqlite_rows(conn, plan))
    version = None
    if plan.place is not None:
        async with conn.execute(VERSION) as cur:
            version = (await cur.fetchone())[0]
    kept = tail.kept(plan, version)
    if kept is not None:
        return cast(T, kept)
    with tail.going(plan, version) as saw:
        rows = saw(await _asqlite_rows(conn, plan))
    return plan.answer(rows)


async def _asqlite_rows(conn: Any, plan: Plan[Any]) -> list[list[Any]]:
    if plan.write and not conn.in_transaction:
        await _begin(conn)
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
    return rows


async def _begin(conn: Any) -> None:
    """``BEGIN IMMEDIATE`` on ``aiosqlite``'s thread, which goes on when its caller is cancelled
    (waiting on a busy database, say): then the transaction it opens is rolled back once it is
    open, or the connection would hold the write lock and every other writer would wait."""
    begun = asyncio.ensure_future(conn.execute("BEGIN IMMEDIATE"))
    try:
        await asyncio.shield(begun)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await begun
            await conn.rollback()
        raise


def _postgres(cur: Any, plan: Plan[T]) -> T:
    with cur.connection.transaction() if plan.write else contextlib.nullcontext():
        rows = []
        for sql, args, read in plan.steps:
            cur.execute(sql, args)
            if read:
                rows.append(cur.fetchall())
    return plan.answer(rows)


async def _apostgres(cur: Any, plan: Plan[T]) -> T:
    async with cur.connection.transaction() if plan.write else contextlib.nullcontext():
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
