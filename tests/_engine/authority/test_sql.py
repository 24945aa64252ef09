"""Records in a table of the run's own database, on the four savers of SQLite and Postgres:
every method round trips, a call is claimed once even by processes racing for it, a reader
reads incrementally and misses nothing while others write, and a row edited with SQL no longer
verifies."""

from __future__ import annotations

import asyncio
import functools
import json
import multiprocessing
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg_pool import AsyncConnectionPool

from gated_react._engine.authority import statements as plans
from gated_react._engine.authority.backends import MemoryBackend
from gated_react._engine.authority.ledger import Ledger, ledger_for
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.authority.sql import SqlBackend, backend_for
from gated_react._engine.authority.statements import TABLE
from gated_react.store.checkpointer import (
    StoreURL,
    aopen_checkpointer,
    open_checkpointer,
    pg_kwargs,
)
from gated_react.store.coalesced import CoalescedPostgresSaver
from gated_react.store.key import StoreKey
from gated_react.store.serializer import serializer
from gated_react.store.signed import unwrapped

from ...support.reaping import PATIENCE

KEY = StoreKey(b"k" * 32)


@dataclass(frozen=True)
class Where:
    url: str
    is_async: bool


def _sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.sqlite'}"


@pytest.fixture(
    params=[
        pytest.param(("sqlite", False), id="sqlite"),
        pytest.param(("sqlite", True), id="async-sqlite"),
        pytest.param(("postgres", False), id="postgres", marks=pytest.mark.postgres),
        pytest.param(("postgres", True), id="async-postgres", marks=pytest.mark.postgres),
    ]
)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Where:
    """Each of the four savers, on a fresh SQLite file or Postgres database."""
    db, is_async = request.param
    url = request.getfixturevalue("pg_url") if db == "postgres" else _sqlite_url(tmp_path)
    return Where(url, is_async)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh SQLite file or Postgres database (for what one mode shows of both)."""
    return (
        request.getfixturevalue("pg_url") if request.param == "postgres" else _sqlite_url(tmp_path)
    )


@asynccontextmanager
async def opened(where: Where) -> AsyncIterator[Any]:
    """The saver ``open_checkpointer`` (or its async twin) opens, unwrapped."""
    if where.is_async:
        async with aopen_checkpointer(where.url) as saver:
            yield unwrapped(saver)
    else:
        with open_checkpointer(where.url) as saver:
            yield unwrapped(saver)


class Twin:
    """``inner``'s methods called in its saver's mode: ``await twin.insert(...)`` is ``ainsert``
    on an async saver's backend (or ledger), ``insert`` on a sync one's."""

    def __init__(self, inner: Any, is_async: bool) -> None:
        self.inner, self.is_async = inner, is_async

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if self.is_async:
            return getattr(self.inner, f"a{name}")  # type: ignore[no-any-return]
        method = getattr(self.inner, name)

        async def call(*args: Any) -> Any:
            return method(*args)

        return call


def sql(url: str, statement: str, *args: Any) -> list[tuple[Any, ...]]:
    """``statement`` run on a connection of its own, committed (``?`` marks parameters)."""
    store = StoreURL.parse(url)
    if store.kind == "sqlite":
        with closing(sqlite3.connect(store.target)) as conn, conn:
            return conn.execute(statement, args).fetchall()
    with psycopg.connect(store.target, autocommit=True) as pg:
        cur = pg.execute(statement.replace("?", "%s"), args)
        return cur.fetchall() if cur.description else []


def record(kind: Kind, key: str, thread: str = "t1", run: str = "r1", **body: Any) -> Record:
    return Record(thread, run, kind, key, body)


def in_loop(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """An async test run in a loop of its own (its fixtures are the test's)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))  # type: ignore[arg-type]

    return run


BODY: dict[str, Any] = {
    "call": "c1",
    "tool": "pay",
    "args": {"ü": [1, 2.5, None, True]},
    "note": "a\x00b\u2028",
}


@in_loop
async def test_every_method_round_trips(where: Where) -> None:
    async with opened(where) as saver:
        backend = backend_for(saver)
        assert isinstance(backend, SqlBackend)
        twin = Twin(backend, where.is_async)
        wrote = [record(Kind.OPENED, "r1"), record(Kind.PERMIT, "k1", **BODY)]
        seqs = await twin.insert(wrote)
        assert seqs == sorted(seqs)
        assert len(set(seqs)) == 2
        assert await twin.after("t1", "r1", 0) == [
            replace(r, seq=s) for r, s in zip(wrote, seqs, strict=True)
        ]
        started = await twin.claim(record(Kind.STARTED, "c1"))
        assert started is not None
        assert started > seqs[-1]
        assert await twin.claim(record(Kind.STARTED, "c1", thread="t2")) is None
        [done] = await twin.insert([record(Kind.DONE, "c1", thread="t2", run="r9")])
        about = await twin.about(["c1", "nothing", "c1"])
        assert [(r.thread, r.kind, r.seq) for r in about] == [
            ("t1", Kind.PERMIT, seqs[1]),  # its call id is c1
            ("t1", Kind.STARTED, started),
            ("t2", Kind.DONE, done),
        ]
        assert await twin.about([]) == []
        assert await twin.last_run("t1") == "r1"
        await twin.insert([record(Kind.OPENED, "r2", run="r2")])
        assert await twin.last_run("t1") == "r2"
        assert await twin.last_run("t3") is None
        assert await twin.first("t1") == seqs[0]
        assert await twin.first("t3") is None
        assert await twin.forget("t1") == 4
        assert await twin.first("t1") is None
        assert await twin.after("t1", "r1", 0) == []
        assert await twin.last_run("t1") is None
        assert [r.thread for r in await twin.about(["c1"])] == ["t2"]


@in_loop
async def test_the_ledger_that_signed_a_row_refuses_it_edited(
    where: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row read back exactly as this ledger signed it needs no second HMAC; one edited in
    between (any column the signature covers, or another row's signature copied) is checked,
    and refused."""
    async with opened(where) as saver:
        ledger = Twin(Ledger(backend_for(saver), KEY), where.is_async)  # type: ignore[arg-type]
        await ledger.append([record(Kind.PERMIT, f"k{i}", call=f"c{i}") for i in range(5)])
        edits = [
            'body = \'{"call":"c1","tool":"x"}\' WHERE key = \'k1\'',
            "at = at + 1 WHERE key = 'k2'",
            "run = 'r2' WHERE key = 'k3'",
            f"mac = (SELECT mac FROM {TABLE} WHERE key = 'k0') WHERE key = 'k4'",
        ]
        for edit in edits:
            sql(where.url, f"UPDATE {TABLE} SET {edit}")
        checked, check = [], Record.holds
        monkeypatch.setattr(Record, "holds", lambda r, k: checked.append(r.key) or check(r, k))
        read = (await ledger.book("t1", "r1")).records
        assert checked == ["k1", "k2", "k4"]
        assert [(r.key, r.verified) for r in read] == [
            ("k0", True), ("k1", False), ("k2", False), ("k4", False)
        ]  # fmt: skip
        assert [r.verified for r in (await ledger.book("t1", "r2")).records] == [False]


@in_loop
async def test_what_a_ledger_reads_back_is_the_row_not_the_object_it_signed(where: Where) -> None:
    """A body changed in this process after its record was signed changes nothing read back."""
    async with opened(where) as saver:
        ledger = Twin(Ledger(backend_for(saver), KEY), where.is_async)  # type: ignore[arg-type]
        body: dict[str, Any] = {"call": "c1", "tool": "pay", "args": {"to": "ann"}}
        await ledger.append([Record("t1", "r1", Kind.PERMIT, "k1", body)])
        body["args"]["to"] = "mallory"
        (read,) = (await ledger.book("t1", "r1")).records
        assert read.verified
        assert read.body == {"call": "c1", "tool": "pay", "args": {"to": "ann"}}
        assert read.text == ""  # checked: the book keeps the body alone


@in_loop
async def test_records_are_found_by_any_number_of_keys(where: Where) -> None:
    """One key, a few, and more than are compared one parameter each (a reply of many calls)."""
    async with opened(where) as saver:
        twin = Twin(backend_for(saver), where.is_async)
        seqs = await twin.insert([record(Kind.DONE, f"k{i}", call=f"c{i}") for i in range(300)])
        for count in (1, 3, 64, 65, 300):
            keys = [f"k{i}" for i in range(0, count, 2)] + [f"c{i}" for i in range(1, count, 2)]
            found = await twin.about([*keys, "nothing"])
            assert [r.seq for r in found] == seqs[:count], count


async def _called(method: Callable[..., Any], *args: Any) -> Any:
    result = method(*args)
    return await result if asyncio.iscoroutine(result) else result


@in_loop
async def test_the_other_mode_is_refused_in_one_line(where: Where) -> None:
    calls = {"insert": ([],), "claim": (record(Kind.STARTED, "k"),), "after": ("t", "r", 0),
             "about": (["k"],), "last_run": ("t",), "forget": ("t",)}  # fmt: skip
    async with opened(where) as saver:
        backend = backend_for(saver)
        for name, args in calls.items():
            other = name if where.is_async else f"a{name}"
            with pytest.raises(RuntimeError) as refused:
                await _called(getattr(backend, other), *args)
            said = str(refused.value)
            assert "\n" not in said
            assert type(saver).__name__ in said
            assert f"use {'await a' if where.is_async else ''}{name}()" in said


@in_loop
async def test_after_reads_only_what_was_stored_since(where: Where) -> None:
    async with opened(where) as saver:
        twin = Twin(backend_for(saver), where.is_async)
        first = await twin.insert([record(Kind.OPENED, "r1"), record(Kind.MODEL, "m1")])
        await twin.insert([record(Kind.OPENED, "r2", run="r2"), record(Kind.MODEL, "m1", "t2")])
        assert [r.seq for r in await twin.after("t1", "r1", 0)] == first
        more = await twin.insert([record(Kind.PAID, "m1"), record(Kind.ENDED, "r1")])
        assert [r.seq for r in await twin.after("t1", "r1", first[-1])] == more
        assert await twin.after("t1", "r1", more[-1]) == []
        whole = [first[0], first[1], *more]  # t1's, r1's and r2's, not t2's
        whole.insert(2, (await twin.after("t1", "r2", 0))[0].seq)
        assert [r.seq for r in await twin.after("t1", None, 0)] == whole
        assert [r.seq for r in await twin.after("t1", None, whole[2])] == more


@in_loop
async def test_a_ledger_verifies_what_it_signed_and_no_row_edited_with_sql(where: Where) -> None:
    async with opened(where) as saver:
        ledger = Twin(Ledger(backend_for(saver), KEY), where.is_async)  # type: ignore[arg-type]
        wrote = [record(Kind.PERMIT, f"k{i}", call=f"c{i}", tool="pay") for i in range(4)]
        await ledger.append(wrote)
        assert [r.verified for r in (await ledger.book("t1", "r1")).records] == [True] * 4
        sql(where.url, f"UPDATE {TABLE} SET body = ? WHERE key = 'k1'", '{"call":"c1","tool":"x"}')
        sql(where.url, f"UPDATE {TABLE} SET body = 'not json' WHERE key = 'k2'")
        blob = "X'7b7d'" if where.url.startswith("sqlite") else "'\\x7b7d'::bytea::text"
        sql(where.url, f"UPDATE {TABLE} SET body = {blob} WHERE key = 'k3'")  # bytes, not text
        fresh = Twin(Ledger(backend_for(saver), KEY), where.is_async)  # type: ignore[arg-type]
        read = (await fresh.book("t1", "r1")).records
        assert [(r.key, r.verified) for r in read] == [
            ("k0", True), ("k1", False), ("k2", False), ("k3", False)
        ]  # fmt: skip
        assert read[2].body == read[3].body == {}  # still read: an unverified record holds back
        assert [r.verified for r in await fresh.about(["c0", "c1"])] == [True, False]
        other = Twin(Ledger(backend_for(saver), StoreKey(b"o" * 32)), where.is_async)  # type: ignore[arg-type]
        assert not any(r.verified for r in (await other.book("t1", "r1")).records)


INDEXES = ("thread_seq", "key", "call", "started")


def _schema(url: str) -> list[str]:
    if StoreURL.parse(url).kind == "sqlite":
        query = f"SELECT name FROM sqlite_master WHERE tbl_name = '{TABLE}' AND sql IS NOT NULL"
    else:
        query = f"SELECT indexname FROM pg_indexes WHERE tablename = '{TABLE}' UNION ALL "
        query += f"SELECT tablename FROM pg_tables WHERE tablename = '{TABLE}'"
    return sorted(name for (name,) in sql(url, query))


def test_every_read_is_an_index_search(tmp_path: Path) -> None:
    """No read walks the table: a run's records and a thread's are found through the thread's
    index from the last one read, call keys and ids through theirs."""
    with open_checkpointer(_sqlite_url(tmp_path)) as saver:
        raw = unwrapped(saver)
        backend = backend_for(raw)
        assert isinstance(backend, SqlBackend)
        backend.insert([record(Kind.MODEL, "m1")])
        d = backend.dialect
        reads = [(d.after, ("t", "r", 0)), (d.thread_after, ("t", 0)), (d.last_run, ("t",)),
                 (d.first, ("t",)), (plans._about_sql(d, 2), ("a", "b", "a", "b"))]  # fmt: skip
        for statement, args in reads:
            plan = [row[3] for row in raw.conn.execute(f"EXPLAIN QUERY PLAN {statement}", args)]
            assert not [step for step in plan if step.startswith("SCAN")], (statement, plan)
            assert any("INDEX" in step for step in plan), (statement, plan)


@in_loop
async def test_the_table_is_made_on_first_use_and_shared(where: Where) -> None:
    async with opened(where) as saver, opened(where) as second:
        backend = Twin(backend_for(saver), where.is_async)
        assert _schema(where.url) == []  # nothing made by finding the backend
        [seq] = await backend.insert([record(Kind.OPENED, "r1")])
        made = _schema(where.url)
        primary = [f"{TABLE}_pkey"] if StoreURL.parse(where.url).kind == "postgres" else []
        assert made == sorted([TABLE, *primary, *(f"{TABLE}_{n}" for n in INDEXES)])
        other = Twin(backend_for(second), where.is_async)
        assert [r.seq for r in await other.after("t1", "r1", 0)] == [seq]
        assert await other.claim(record(Kind.STARTED, "k"))
        assert await backend.claim(record(Kind.STARTED, "k")) is None
        assert _schema(where.url) == made


def test_ledger_for_a_stores_saver_keeps_its_records_in_the_table(db_url: str) -> None:
    with open_checkpointer(db_url, key=KEY) as saver:
        ledger = ledger_for(saver)  # the signing saver, unwrapped inside
        assert isinstance(ledger.backend, SqlBackend)
        ledger.append([record(Kind.OPENED, "r1")])
        assert sql(db_url, f"SELECT thread_id, kind FROM {TABLE}") == [("t1", "opened")]
    assert backend_for(InMemorySaver()) is None
    assert backend_for(object()) is None
    assert isinstance(ledger_for(InMemorySaver()).backend, MemoryBackend)


def test_finding_a_backend_loads_no_driver() -> None:
    code = (
        "import sqlite3, sys\n"
        "from langgraph.checkpoint.sqlite import SqliteSaver\n"
        "from gated_react._engine.authority.sql import backend_for\n"
        "found = backend_for(SqliteSaver(sqlite3.connect(':memory:')))\n"
        "print(type(found).__name__, *(m for m in ('psycopg', 'aiosqlite') if m in sys.modules))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=PATIENCE, check=True
    )
    assert ran.stdout.split() == ["SqliteBackend"]


# --- processes at once ---------------------------------------------------------------------


def _processes() -> Any:
    made = multiprocessing.get_context("forkserver")
    made.set_forkserver_preload([__name__])  # children start without paying the imports
    return made


def _run_all(target: Callable[..., None], *each: tuple[Any, ...]) -> None:
    """Processes running ``target`` with each of the argument tuples, all exited cleanly."""
    procs = [_processes().Process(target=target, args=args) for args in each]
    try:
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(PATIENCE)
        assert [proc.exitcode for proc in procs] == [0] * len(procs)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
            proc.join(PATIENCE)


def _claim_all(url: str, keys: list[str], seed: int, ready: Any, out: str) -> None:
    """Claim each key at the moment every other claimer claims it; the keys won go to ``out``."""
    with open_checkpointer(url) as saver:
        ledger = Ledger(backend_for(unwrapped(saver)), KEY)  # type: ignore[arg-type]
        won = []
        for key in keys:
            ready.wait(PATIENCE)
            if ledger.claim(record(Kind.STARTED, key, thread=f"p{seed}")):
                won.append(key)
    Path(out).write_text(json.dumps(won))


def test_a_call_is_claimed_once_by_processes_racing_for_it(db_url: str, tmp_path: Path) -> None:
    """Four processes claim each of thirty calls at the same moment, on a new database (so they
    also make the table at once): one wins each, and what it wrote is read here, verified."""
    keys, n = [f"call-{i}" for i in range(30)], 4
    ready, outs = _processes().Barrier(n), [str(tmp_path / f"won-{i}") for i in range(n)]
    _run_all(_claim_all, *((db_url, keys, i, ready, outs[i]) for i in range(n)))
    won = {f"p{i}": json.loads(Path(out).read_text()) for i, out in enumerate(outs)}
    assert sorted(key for keys_won in won.values() for key in keys_won) == sorted(keys)
    with open_checkpointer(db_url) as saver:
        found = Ledger(backend_for(unwrapped(saver)), KEY).about(keys)  # type: ignore[arg-type]
    assert all(r.kind is Kind.STARTED and r.verified for r in found)
    assert sorted((r.thread, r.key) for r in found) == sorted(
        (thread, key) for thread, keys_won in won.items() for key in keys_won
    )


def _write_many(url: str, thread: str, count: int, ready: Any) -> None:
    with open_checkpointer(url) as saver:
        ledger = Ledger(backend_for(unwrapped(saver)), KEY)  # type: ignore[arg-type]
        ready.wait(PATIENCE)
        for i in range(count):
            ledger.append([record(Kind.MODEL, f"{thread}-{i}", thread="t1", i=i)])


def test_a_reader_misses_nothing_others_write_while_it_reads(db_url: str) -> None:
    """Three processes write a run's records while this one reads it incrementally, as
    ``Ledger.book`` does: what it read is every record, in order, each verified."""
    ready, count = _processes().Barrier(4), 150
    procs = [_processes().Process(target=_write_many, args=(db_url, f"w{i}", count, ready))
             for i in range(3)]  # fmt: skip
    with open_checkpointer(db_url) as saver:
        ledger = Ledger(backend_for(unwrapped(saver)), KEY)  # type: ignore[arg-type]
        try:
            for proc in procs:
                proc.start()
            ready.wait(PATIENCE)
            while any(proc.is_alive() for proc in procs):
                ledger.book("t1", "r1")  # reads what was stored since its last read
            assert [proc.exitcode for proc in procs] == [0] * 3
        finally:
            for proc in procs:
                proc.kill()
                proc.join(PATIENCE)
        read = ledger.book("t1", "r1").records
        stored = ledger.backend.after("t1", "r1", 0)
    assert len(read) == 3 * count
    assert all(r.verified for r in read)
    assert [r.seq for r in read] == [r.seq for r in stored]


# --- Postgres: the workers' saver, pools, pipelines -----------------------------------------


async def _hold(saver: CoalescedPostgresSaver, thread: str) -> None:
    """A checkpoint that leads to a node that runs no tool: the saver holds it back."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"branch:to:decide": None}
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    await saver.aput(config, checkpoint, {"source": "loop", "step": 0}, {})


@pytest.mark.postgres
@in_loop
async def test_the_workers_saver_commits_records_at_once_and_holds_its_own(pg_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url, **pg_kwargs()) as conn:
        saver = CoalescedPostgresSaver(conn, serde=serializer())
        await saver.setup()
        await _hold(saver, "t1")
        backend = Twin(backend_for(saver), True)
        await backend.insert([record(Kind.PERMIT, "k1", call="c1")])
        assert await backend.claim(record(Kind.STARTED, "c1"))
        assert len(await backend.after("t1", "r1", 0)) == 2
        seen = sql(pg_url, f"SELECT kind FROM {TABLE} ORDER BY seq")  # another connection
        assert seen == [("permit",), ("started",)]
        assert sql(pg_url, "SELECT count(*) FROM checkpoints") == [(0,)]  # still held
        await saver.aflush()
        assert sql(pg_url, "SELECT count(*) FROM checkpoints") == [(1,)]


@pytest.mark.postgres
def test_savers_on_a_pipeline_or_a_pool_keep_records_too(pg_url: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, pipeline=True) as piped:
        backend = backend_for(piped)
        assert backend is not None
        seqs = [
            *backend.insert([record(Kind.OPENED, "r1")]),
            backend.claim(record(Kind.STARTED, "k")),
        ]
        assert backend.claim(record(Kind.STARTED, "k")) is None
        assert [r.seq for r in backend.after("t1", "r1", 0)] == seqs

    async def pooled() -> None:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(pg_url, kwargs=pg_kwargs(), open=False)
        async with pool:
            backend = Twin(backend_for(AsyncPostgresSaver(pool)), True)
            assert await backend.claim(record(Kind.STARTED, "k")) is None
            assert [r.seq for r in await backend.after("t1", "r1", 0)] == seqs

    asyncio.run(pooled())


# --- what it costs (printed, never asserted) ------------------------------------------------


def test_what_an_insert_and_an_incremental_read_cost(db_url: str, capsys: Any) -> None:
    """One record stored, then read by a reader that has read all before it, with 2,000
    records of other runs in the table; the medians are printed."""
    with open_checkpointer(db_url) as saver:
        backend = backend_for(unwrapped(saver))
        assert backend is not None
        backend.insert([record(Kind.MODEL, f"m{i}", run=f"r{i % 50}") for i in range(2000)])
        writes, reads, seq = [], [], 0
        for i in range(200):
            began = time.perf_counter()
            [stored] = backend.insert([record(Kind.MODEL, f"x{i}", run="now", tokens=i)])
            wrote = time.perf_counter()
            [found] = backend.after("t1", "now", seq)
            writes.append(wrote - began)
            reads.append(time.perf_counter() - wrote)
            assert found.seq == stored
            assert found.body == {"tokens": i}
            seq = stored
    kind = StoreURL.parse(db_url).kind
    with capsys.disabled():
        print(f"\n{kind}: insert {statistics.median(writes) * 1e6:.0f} us, incremental after "
              f"{statistics.median(reads) * 1e6:.0f} us (medians of 200)")  # fmt: skip


@in_loop
async def test_an_append_cancelled_on_a_busy_database_leaves_no_transaction(
    tmp_path: Path,
) -> None:
    """Cancelled while ``BEGIN IMMEDIATE`` waits for another connection's write lock, an
    append leaves the async saver's connection out of a transaction once the lock comes: the
    statement goes on on ``aiosqlite``'s thread. Before, the transaction it opened stayed open
    and held the write lock, and every other writer of the file waited on it."""
    path = tmp_path / "runs.sqlite"
    async with aopen_checkpointer(str(path)) as saver:
        raw = unwrapped(saver)
        ledger = ledger_for(raw)
        await ledger.abook("t1", "r1")  # the table is made
        loop, waiting = asyncio.get_running_loop(), asyncio.Event()

        def traced(statement: str) -> None:  # on aiosqlite's thread, as the statement begins
            if statement.startswith("BEGIN IMMEDIATE"):
                loop.call_soon_threadsafe(waiting.set)

        await raw.conn.set_trace_callback(traced)
        with closing(sqlite3.connect(path, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            append = asyncio.create_task(ledger.aappend([record(Kind.PERMIT, "k1", **BODY)]))
            await waiting.wait()
            append.cancel()
            other.execute("COMMIT")
            with pytest.raises(asyncio.CancelledError):
                await append
        await raw.conn.execute("SELECT 1")  # after every statement queued before it
        assert not raw.conn.in_transaction
        with closing(sqlite3.connect(path, timeout=0)) as third:
            third.execute("BEGIN IMMEDIATE")  # the write lock is free
            third.rollback()
        assert (await ledger.abook("t1", "r1")).records == []
