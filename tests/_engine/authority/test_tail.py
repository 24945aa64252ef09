"""A SQLite backend reads a run's records back from its own inserts while no other connection
has written, and from the table whenever anything else may have: another connection's commit,
a thread deleted through the saver's connection, a read from an earlier point, a failed write,
too many records kept. Either way a reader gets what the table holds."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from gated_react._engine.authority import tail as tails
from gated_react._engine.authority.ledger import Ledger
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.authority.sql import backend_for
from gated_react._engine.authority.statements import TABLE
from gated_react.store.checkpointer import aopen_checkpointer, open_checkpointer
from gated_react.store.key import StoreKey
from gated_react.store.rows import changed_outside
from gated_react.store.signed import unwrapped

KEY = StoreKey(b"k" * 32)


def _record(key: str, run: str = "r1", **body: Any) -> Record:
    return Record("t1", run, Kind.PERMIT, key, body or {"call": key, "tool": "pay"})


class Reads:
    """The reads of the records table a connection runs (its trace callback)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def count(self) -> int:
        found = [s for s in self.statements if s.startswith("SELECT seq") and TABLE in s]
        self.statements.clear()
        return len(found)


@contextmanager
def ledger_on(tmp_path: Path) -> Iterator[tuple[Ledger, Any, Reads]]:
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        raw = unwrapped(saver)
        reads = Reads()
        raw.conn.set_trace_callback(reads.statements.append)
        yield Ledger(backend_for(raw), KEY), raw, reads  # type: ignore[arg-type]


def _keys(records: list[Record]) -> list[str]:
    return [r.key for r in records]


def _other(tmp_path: Path, statement: str, *args: Any) -> None:
    """``statement`` committed by another connection (another process would be the same)."""
    with closing(sqlite3.connect(tmp_path / "runs.sqlite")) as conn, conn:
        conn.execute(statement, args)


def test_a_runs_own_records_are_read_back_without_a_query(tmp_path: Path) -> None:
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.append([_record("k0")])
        ledger.book("t1", "r1")
        assert reads.count() == 1  # the first read is the table's
        for i in range(1, 4):
            ledger.append([_record(f"k{i}")])
            book = ledger.book("t1", "r1")
        assert reads.count() == 0
        assert _keys(book.records) == ["k0", "k1", "k2", "k3"]
        assert all(r.verified and r.text == "" for r in book.records)
        assert book.tally.usage().tool_calls == 4
        fresh = Ledger(ledger.backend, KEY).book("t1", "r1")  # as the table gives them
        assert [(r.seq, r.body, r.at, r.mac) for r in fresh.records] == [
            (r.seq, r.body, r.at, r.mac) for r in book.records
        ]


def test_a_body_reads_back_as_its_stored_text_says(tmp_path: Path) -> None:
    """A value JSON holds as another type (a tuple) comes back as the table gives it."""
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.book("t1", "r1")
        ledger.append([_record("k1", call="c1", tool="pay", args=("a", 1))])
        (read,) = ledger.book("t1", "r1").records
        assert reads.count() == 1
        assert read.body == {"call": "c1", "tool": "pay", "args": ["a", 1]}
        assert read.verified


def test_a_body_changed_by_its_appender_after_append_is_not_read(tmp_path: Path) -> None:
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.book("t1", "r1")
        assert reads.count() == 1
        record = _record("k1", call="c1", tool="pay")
        ledger.append([record])
        record.body["tool"] = "refund"
        (read,) = ledger.book("t1", "r1").records
        assert reads.count() == 0
        assert read.body == {"call": "c1", "tool": "pay"}


def test_another_connections_commit_sends_the_next_read_to_the_table(tmp_path: Path) -> None:
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.append([_record("k1")])
        ledger.book("t1", "r1")
        forged = _record("k2").signed(StoreKey(b"x" * 32))
        _other(tmp_path, f"INSERT INTO {TABLE} (thread_id, run, kind, key, call_id, body, at, mac)"
               " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", "t1", "r1", "permit", "k2", "k2", forged.text,
               forged.at, forged.mac)  # fmt: skip
        ledger.append([_record("k3")])
        reads.count()
        book = ledger.book("t1", "r1")
        assert reads.count() == 1
        assert [(r.key, r.verified) for r in book.records] == [
            ("k1", True), ("k2", False), ("k3", True)
        ]  # fmt: skip


def test_an_edit_by_another_connection_is_read(tmp_path: Path) -> None:
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.book("t1", "r1")
        ledger.append([_record("k1")])
        _other(tmp_path, f"UPDATE {TABLE} SET at = at + 1 WHERE key = 'k1'")
        (read,) = ledger.book("t1", "r1").records
        assert reads.count() == 2
        assert not read.verified


def test_a_write_through_the_savers_connection_outside_the_backend_is_read(
    tmp_path: Path,
) -> None:
    """A thread deleted or re-signed through the saver's own connection says so
    (``changed_outside``): the next read is the table's."""
    with ledger_on(tmp_path) as (ledger, raw, reads):
        ledger.book("t1", "r1")
        ledger.append([_record("k1")])
        with raw.lock:
            raw.conn.execute(f"DELETE FROM {TABLE} WHERE key = 'k1'")
            raw.conn.commit()
        changed_outside()
        reads.count()
        assert ledger.book("t1", "r1").records == []
        assert reads.count() == 1


def test_a_book_made_again_reads_from_the_table(tmp_path: Path) -> None:
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.append([_record("k0")])
        ledger.book("t1", "r1")
        ledger.append([_record("k1")])
        ledger.book("t1", "r1")
        reads.count()
        again = Ledger(ledger.backend, KEY).book("t1", "r1")  # from seq 0: before the tail
        assert _keys(again.records) == ["k0", "k1"]
        assert reads.count() == 1


def test_records_are_kept_until_a_read_asks_from_after_them(tmp_path: Path) -> None:
    """A reader that lost what it was given (it asks from the same point again) gets it
    again; one that asks from after it lets it go."""
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.book("t1", "r1")
        reads.count()
        ledger.append([_record("k1"), _record("k2")])
        backend = ledger.backend
        first = backend.after("t1", "r1", 0)
        assert _keys(backend.after("t1", "r1", 0)) == _keys(first) == ["k1", "k2"]
        assert backend.after("t1", "r1", first[-1].seq) == []
        assert reads.count() == 0


def test_a_thread_forgotten_is_read_from_the_table(tmp_path: Path) -> None:
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.book("t1", None)
        ledger.append([_record("k1")])
        assert ledger.backend.forget("t1") == 1
        reads.count()
        assert ledger.backend.after("t1", None, 0) == []
        assert reads.count() == 1


def test_too_many_records_kept_are_dropped_and_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tails, "KEPT", 3)
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.book("t1", "r1")
        ledger.append([_record(f"k{i}") for i in range(4)])
        reads.count()
        assert _keys(ledger.book("t1", "r1").records) == ["k0", "k1", "k2", "k3"]
        assert reads.count() == 1


def test_a_claim_lost_keeps_nothing(tmp_path: Path) -> None:
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.book("t1", "r1")
        started = Record("t1", "r1", Kind.STARTED, "k1", {"call": "c1"})
        assert ledger.claim(started)
        assert not ledger.claim(started)
        reads.count()
        assert [r.kind for r in ledger.book("t1", "r1").records] == [Kind.STARTED]
        assert reads.count() == 0


def test_a_failed_write_sends_the_next_read_to_the_table(tmp_path: Path) -> None:
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.book("t1", "r1")
        ledger.append([_record("k1")])
        with pytest.raises(sqlite3.IntegrityError):  # NaN is bound as NULL: "at" refuses it
            ledger.append([Record("t1", "r1", Kind.PERMIT, "k2", {"call": "c2"}, float("nan"))])
        reads.count()
        assert _keys(ledger.book("t1", "r1").records) == ["k1"]
        assert reads.count() == 1


@asynccontextmanager
async def aledger_on(tmp_path: Path) -> AsyncIterator[tuple[Ledger, Reads]]:
    async with aopen_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        raw = unwrapped(saver)
        reads = Reads()
        await raw.conn.set_trace_callback(reads.statements.append)
        yield Ledger(backend_for(raw), KEY), reads  # type: ignore[arg-type]


def test_the_async_saver_reads_its_own_records_back_too(tmp_path: Path) -> None:
    asyncio.run(_async_reads(tmp_path))


async def _async_reads(tmp_path: Path) -> None:
    async with aledger_on(tmp_path) as (ledger, reads):
        await ledger.aappend([_record("k0")])
        await ledger.abook("t1", "r1")
        for i in range(1, 3):
            await ledger.aappend([_record(f"k{i}")])
            book = await ledger.abook("t1", "r1")
        assert _keys(book.records) == ["k0", "k1", "k2"]
        _other(tmp_path, f"UPDATE {TABLE} SET at = at + 1 WHERE key = 'k0'")
        await ledger.aappend([_record("k3")])
        book = await ledger.abook("t1", "r1")
        assert _keys(book.records) == ["k0", "k1", "k2", "k3"]
        assert reads.count() == 2  # the first read, and the one after another's commit


def test_two_savers_on_one_connection_keep_no_tail(tmp_path: Path) -> None:
    """Two savers made on one connection (or a saver LangGraph copied) each have a backend:
    neither sees the other's inserts in a tail of its own, so both read the table."""
    conn = sqlite3.connect(tmp_path / "runs.sqlite", check_same_thread=False)
    first, second = SqliteSaver(conn), SqliteSaver(conn)
    first.setup()
    mine, other = Ledger(backend_for(first), KEY), Ledger(backend_for(second), KEY)  # type: ignore[arg-type]
    paid = lambda key, n: Record("t1", "r1", Kind.PAID, key, {"tokens": n})  # noqa: E731
    mine.append([paid("m1", 100)])
    mine.book("t1", "r1")
    other.append([paid("m2", 1000)])
    mine.append([paid("m3", 1)])
    assert mine.book("t1", "r1").tally.usage().tokens == 1101
    conn.close()


def test_an_interrupted_write_leaves_nothing_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interrupt (Ctrl-C, a signal) between a write's commit and its records being kept:
    the next read goes to the table, and finds the committed record."""
    with ledger_on(tmp_path) as (ledger, _, reads):
        ledger.append([_record("k1")])
        ledger.book("t1", "r1")

        def interrupted(*_: Any) -> None:
            raise KeyboardInterrupt

        with monkeypatch.context() as patch:
            patch.setattr(tails.Tail, "saw", interrupted)
            with pytest.raises(KeyboardInterrupt):
                ledger.append([_record("k2")])  # committed: its record is in the table
        ledger.append([_record("k3")])
        reads.count()
        assert _keys(ledger.book("t1", "r1").records) == ["k1", "k2", "k3"]
        assert reads.count() == 1
