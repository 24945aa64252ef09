"""Where records live (``MemoryBackend``) and how a run's are read (``Ledger``, ``Book``): in
order, one run at a time, claimed at most once per call key, found by key or call id in any
thread, and read incrementally: a check at step 300 reads only what is new since step 299."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from gated_react._engine.authority import ledger as ledgers
from gated_react._engine.authority.ledger import Ledger, MemoryBackend, Place, ledger_for
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.langgraph_internals import (
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
)
from gated_react.store.key import StoreKey

KEY = StoreKey("k" * 32)


def _rec(thread: str, run: str, kind: Kind, key: str, **body: Any) -> Record:
    return Record(thread, run, kind, key, body).signed(KEY)


def _keys(records: Sequence[Record]) -> list[str]:
    return [r.key for r in records]


def test_records_are_numbered_in_order_and_read_one_run_after_a_number() -> None:
    backend = MemoryBackend()
    seqs = backend.insert([
        _rec("t", "r1", Kind.OPENED, "r1"),
        _rec("t", "r2", Kind.OPENED, "r2"),
        _rec("u", "r1", Kind.OPENED, "r1"),
        _rec("t", "r1", Kind.PERMIT, "k1", call="c1"),
        _rec("t", "r1", Kind.DONE, "k1", call="c1"),
    ])  # fmt: skip
    assert seqs == [1, 2, 3, 4, 5]
    assert [r.seq for r in backend.after("t", "r1", 0)] == [1, 4, 5]
    assert [r.seq for r in backend.after("t", "r1", 1)] == [4, 5]
    assert [r.seq for r in backend.after("t", "r1", 4)] == [5]
    assert backend.after("t", "r1", 5) == []
    assert backend.after("t", "nope", 0) == []
    assert backend.last_run("t") == "r1"
    assert backend.last_run("u") == "r1"
    assert backend.last_run("v") is None
    backend.insert([_rec("t", "r2", Kind.ENDED, "r2")])
    assert backend.last_run("t") == "r2"


def test_a_call_key_is_claimed_once() -> None:
    backend = MemoryBackend()
    first = _rec("t", "r", Kind.STARTED, "k1", call="c1")
    assert backend.claim(first) == 1
    assert backend.claim(first) is None
    assert backend.claim(_rec("u", "r9", Kind.STARTED, "k1", call="c9")) is None  # any thread
    assert backend.claim(_rec("t", "r", Kind.STARTED, "k2", call="c2")) == 2
    done = backend.insert([_rec("t", "r", Kind.DONE, "k1", call="c1")])
    assert done == [3]
    assert backend.claim(first) is None  # done is no release: the call ran


def test_of_many_threads_claiming_one_key_at_once_exactly_one_wins() -> None:
    backend, won = MemoryBackend(), []
    start = threading.Barrier(16)

    def claim(n: int) -> None:
        start.wait()
        won.append(backend.claim(_rec("t", "r", Kind.STARTED, "pay-once", call=f"c{n}")))

    workers = [threading.Thread(target=claim, args=(n,)) for n in range(16)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(won, key=lambda seq: seq or 0) == [None] * 15 + [1]


def test_records_are_found_by_key_or_call_id_in_any_thread_once_each() -> None:
    backend = MemoryBackend()
    backend.insert([
        _rec("t", "r", Kind.PERMIT, "k1", call="c1"),
        _rec("copy", "r", Kind.STARTED, "k-copy", call="c1"),  # a copied thread keeps ids
        _rec("t", "r", Kind.PERMIT, "k2", call="c2"),
        _rec("t", "r", Kind.DONE, "k1", call="c1"),
    ])  # fmt: skip
    assert [r.seq for r in backend.about(["k1"])] == [1, 4]
    assert [r.seq for r in backend.about(["c1"])] == [1, 2, 4]
    assert [r.seq for r in backend.about(["k1", "c1", "k1"])] == [1, 2, 4]  # each once, in order
    assert [r.seq for r in backend.about(["k2", "c9"])] == [3]
    assert backend.about([]) == []


def test_a_backend_of_unsaved_runs_keeps_the_newest_runs_only() -> None:
    backend = MemoryBackend(runs=2)
    for run in ("r1", "r2", "r3"):
        backend.insert([_rec("t", run, Kind.PERMIT, f"k-{run}", call=f"c-{run}")])
    assert backend.after("t", "r1", 0) == []
    assert _keys(backend.after("t", "r2", 0)) == ["k-r2"]
    assert backend.about(["k-r1", "c-r1"]) == []  # its keys go with it
    assert backend.claim(_rec("t", "r1", Kind.STARTED, "k-r1")) is not None


def test_a_thread_forgotten_leaves_the_others() -> None:
    backend = MemoryBackend()
    backend.insert([_rec("t", "r", Kind.PERMIT, "k1", call="c1"),
                    _rec("u", "r", Kind.PERMIT, "k2", call="c2")])  # fmt: skip
    assert backend.forget("t") == 1
    assert backend.after("t", "r", 0) == []
    assert backend.about(["k1", "c1"]) == []
    assert _keys(backend.about(["k2"])) == ["k2"]
    assert backend.last_run("t") is None


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
    assert started.checked(KEY).verified


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
