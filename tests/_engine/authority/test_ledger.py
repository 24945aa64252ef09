"""How a run's records are read (``Ledger``, ``Book``): incrementally (a check at step 300
reads only what is new since step 299), each counted once, and from the ledger of the saver a
node runs under."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from gated_react._engine.authority import ledger as ledgers
from gated_react._engine.authority.backends import MemoryBackend
from gated_react._engine.authority.ledger import Ledger, Place, ledger_for
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.langgraph_internals import (
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
)
from gated_react.store.key import StoreKey

from ...support.reaping import PATIENCE

KEY = StoreKey("k" * 32)


def _rec(thread: str, run: str, kind: Kind, key: str, **body: Any) -> Record:
    return Record(thread, run, kind, key, body).signed(KEY)


def _keys(records: Sequence[Record]) -> list[str]:
    return [r.key for r in records]


class Counting(MemoryBackend):
    """A memory backend that remembers every ``after`` asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def after(self, thread: str, run: str, seq: int) -> list[Record]:
        self.asked.append(seq)
        return super().after(thread, run, seq)


def test_a_book_reads_only_what_was_stored_since_its_last_read() -> None:
    backend = Counting()
    ledger = Ledger(backend, KEY)
    ledger.append([Record("t", "r", Kind.PERMIT, "k1", {"call": "c1", "tool": "a"})])
    book = ledger.book("t", "r")
    assert (len(book.records), book.seq) == (1, 1)
    ledger.append([Record("u", "r", Kind.PERMIT, "k9", {"call": "c9", "tool": "a"})])
    ledger.append([Record("t", "r", Kind.PERMIT, "k2", {"call": "c2", "tool": "b"})])
    again = ledger.book("t", "r")
    assert again is book
    assert _keys(again.records) == ["k1", "k2"]
    assert ledger.book("t", "r").tally.usage().tool_calls == 2
    assert backend.asked == [0, 1, 3]


def test_a_record_read_twice_is_counted_once() -> None:
    """Two readers of one run at once may both read the same new records: the book skips
    what it holds already."""
    ledger = Ledger(MemoryBackend(), KEY)
    ledger.append([Record("t", "r", Kind.PERMIT, "k1", {"call": "c1", "tool": "a"})])
    book = ledger.book("t", "r")
    book.extend(ledger.backend.after("t", "r", 0))
    assert len(book.records) == 1
    assert book.tally.usage().tool_calls == 1


def test_a_book_pushed_out_is_read_again_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledgers, "BOOKS", 2)
    ledger = Ledger(MemoryBackend(), KEY)
    for run in ("r1", "r2", "r3"):
        ledger.append([Record("t", run, Kind.PERMIT, f"k-{run}", {"call": run, "tool": "a"})])
        ledger.book("t", run)
    first = ledger.book("t", "r1")  # pushed out by r3: a fresh book, read from the start
    assert _keys(first.records) == ["k-r1"]
    assert first.tally.usage().tool_calls == 1


class _Outside(MemoryBackend):
    """Records kept as a database keeps them: written by anyone who can reach it."""

    in_process = False


def test_a_ledger_signs_what_it_stores_and_checks_what_it_reads() -> None:
    backend = _Outside()
    ledger = Ledger(backend, KEY)
    ledger.append([Record("t", "r", Kind.PERMIT, "k1", {"call": "c1", "tool": "a"})])
    backend.insert([Record("t", "r", Kind.PERMIT, "k2", {"call": "c2", "tool": "a"})])  # forged
    backend.insert([Record("t", "r", Kind.PERMIT, "k3", {"call": "c3", "tool": "a"}).signed(
        StoreKey("x" * 32))])  # fmt: skip
    assert [r.verified for r in ledger.book("t", "r").records] == [True, False, False]
    assert [r.verified for r in ledger.about(["k1", "k2", "k3"])] == [True, False, False]
    assert ledger.claim(Record("t", "r", Kind.STARTED, "k1", {"call": "c1"}))
    assert not ledger.claim(Record("t", "r", Kind.STARTED, "k1", {"call": "c1"}))
    (started,) = [r for r in backend.about(["k1"]) if r.kind is Kind.STARTED]
    assert started.holds(KEY)


def test_one_ledger_per_saver_and_one_for_graphs_without_one() -> None:
    one, two = InMemorySaver(), InMemorySaver()
    assert ledger_for(one) is ledger_for(one)
    assert ledger_for(one) is not ledger_for(two)
    assert ledger_for(one).backend is not ledger_for(two).backend
    assert ledger_for(None) is ledger_for(None)
    assert ledger_for(None) is not ledger_for(one)


def test_a_nodes_place_is_its_savers_ledger_and_its_thread() -> None:
    saver = InMemorySaver()
    top = Place.of({"configurable": {"thread_id": "t", CONFIG_KEY_CHECKPOINTER: saver,
                                     CONFIG_KEY_CHECKPOINT_NS: "decide:task-1"}})  # fmt: skip
    assert (top.ledger, top.thread, top.saved) == (ledger_for(saver), "t", True)
    namespace = "agent:p1|decide:task-2"  # a node of a subgraph run by the parent's task p1
    inner = Place.of({"configurable": {"thread_id": "t", CONFIG_KEY_CHECKPOINTER: saver,
                                       CONFIG_KEY_CHECKPOINT_NS: namespace}})  # fmt: skip
    # A subgraph's records are its own, named by the node path without task ids: a task id is
    # new on every attempt, so a retried parent task must find the records its first try wrote.
    assert inner.thread == "t|agent"
    unsaved = Place.of({"configurable": {"thread_id": "t"}})
    assert (unsaved.ledger, unsaved.saved) == (ledger_for(None), False)
    record = top.record("q-1", Kind.DONE, "k1", call="c1", ok=True)
    assert (record.thread, record.run, record.key, record.body) == (
        "t", "q-1", "k1", {"call": "c1", "ok": True},
    )  # fmt: skip


def test_records_in_this_processs_memory_are_trusted_as_given_not_signed() -> None:
    """Nothing outside the process writes a memory ledger: its own records are verified
    without a signature (no digest per record), and a record put in unverified stays so."""
    backend = MemoryBackend()
    ledger = Ledger(backend, KEY)
    ledger.append([Record("t", "r", Kind.PERMIT, "k1", {"call": "c1", "tool": "a"})])
    backend.insert([Record("t", "r", Kind.PERMIT, "k2", {"call": "c2", "tool": "a"})])
    read = ledger.book("t", "r").records
    assert [(r.verified, r.mac) for r in read] == [(True, ""), (False, "")]
    assert list(ledger.book("t", "r").tally.permits) == ["c1"]


def test_a_reader_on_another_thread_waits_for_an_extend_under_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two readers of one run on two threads may read the same new records: the second
    waits for the first's ``extend`` to finish, then skips what it added (each record is
    counted once)."""
    book = ledgers.Book()
    record = Record("t", "r", Kind.PERMIT, "k1", {"call": "c1", "tool": "a"}, seq=1)
    counting, go = threading.Event(), threading.Event()
    add = book.tally.add

    def slow_add(found: Record) -> None:
        counting.set()
        go.wait(PATIENCE)
        add(found)

    monkeypatch.setattr(book.tally, "add", slow_add)
    first = threading.Thread(target=book.extend, args=([record],))
    first.start()
    assert counting.wait(PATIENCE)
    assert not book._lock.acquire(blocking=False)  # a second reader would wait here
    go.set()
    first.join(PATIENCE)
    book.extend([record])
    assert [r.key for r in book.records] == ["k1"]
    assert book.tally.usage().tool_calls == 1


def test_a_threads_record_gone_from_the_store_is_read_again_as_a_run_opens() -> None:
    """What a ledger read of a thread (its limits) is read again once the store no longer
    holds its oldest record (the thread deleted by another process and begun again)."""
    backend = MemoryBackend()
    ledger = Ledger(backend, KEY)
    ledger.renew("t")  # nothing read of it: nothing to ask
    ledger.append([_rec("t", "r1", Kind.PERMIT, "k1", call="c1", tool="a")])
    assert _keys(ledger.book("t", None).records) == ["k1"]
    ledger.renew("t")
    backend.forget("t")
    ledger.append([_rec("t", "r2", Kind.PERMIT, "k2", call="c2", tool="a")])
    assert _keys(ledger.book("t", None).records) == ["k1", "k2"]  # read on from where it was
    asyncio.run(ledger.arenew("t"))
    assert _keys(ledger.book("t", None).records) == ["k2"]
    assert ledger.book("t", "r1").records == []  # every book of the thread, a run's too
    assert ledger.book("t", None).tally.usage().tool_calls == 1
