"""Where records live in memory (``MemoryBackend``): in order, one run at a time, claimed at
most once per call key, found by key or call id in any thread, the newest runs kept when
bounded, a thread forgotten alone, and with its saver's thread when the saver deletes one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Budget, Policy, build_graph
from gated_react._engine.authority.backends import MemoryBackend
from gated_react._engine.authority.records import Kind, Record
from gated_react.store.key import StoreKey
from gated_react.testing import ScriptedChatModel, call

KEY = StoreKey("k" * 32)


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


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
    assert [r.seq for r in backend.after("t", None, 0)] == [1, 2, 4, 5]  # every run's of t
    assert [r.seq for r in backend.after("t", None, 2)] == [4, 5]
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
    assert _keys(backend.after("t", None, 0)) == ["k-r2", "k-r3"]  # and the thread's list
    assert backend.about(["k-r1", "c-r1"]) == []  # its keys go with it
    assert backend.claim(_rec("t", "r1", Kind.STARTED, "k-r1")) is not None


def test_a_thread_forgotten_leaves_the_others() -> None:
    backend = MemoryBackend()
    backend.insert([_rec("t", "r", Kind.PERMIT, "k1", call="c1"),
                    _rec("u", "r", Kind.PERMIT, "k2", call="c2")])  # fmt: skip
    assert backend.forget("t") == 1
    assert backend.after("t", "r", 0) == []
    assert backend.after("t", None, 0) == []
    assert _keys(backend.after("u", None, 0)) == ["k2"]
    assert backend.about(["k1", "c1"]) == []
    assert _keys(backend.about(["k2"])) == ["k2"]
    assert backend.last_run("t") is None


def test_a_call_id_every_run_reuses_finds_each_record_and_loses_none_when_one_thread_goes() -> None:
    backend = MemoryBackend()
    for n in range(20):  # a model that names the first call of every run "call_0"
        backend.insert([_rec(f"t{n % 2}", f"r{n}", Kind.PERMIT, f"k{n}", call="call_0")])
    assert [r.seq for r in backend.about(["call_0"])] == list(range(1, 21))
    assert backend.forget("t0") == 10
    assert [r.seq for r in backend.about(["call_0"])] == list(range(2, 21, 2))
    assert backend.insert([_rec("t1", "r99", Kind.DONE, "k99", call="call_0")]) == [21]
    assert [r.seq for r in backend.about(["call_0"])][-2:] == [20, 21]  # never a number again


def test_a_savers_delete_thread_drops_the_threads_records_and_its_subgraphs() -> None:
    """Beside a saver (``beside``), the saver's ``delete_thread`` and ``adelete_thread`` drop the
    thread's own and its subgraphs' records after its checkpoints; a thread whose id merely
    starts the same keeps its records."""
    saver = InMemorySaver()
    backend = MemoryBackend().beside(saver)
    for thread in ("t", "t|agent:1", "t||x", "u"):
        backend.insert([_rec(thread, "r", Kind.PERMIT, f"k-{thread}")])
    saver.delete_thread("t")
    assert sorted(backend._threads) == ["t||x", "u"]  # "t|x" names thread "t|x", not t's part
    asyncio.run(saver.adelete_thread("u"))
    assert sorted(backend._threads) == ["t||x"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_in_memory_thread_deleted_and_begun_again_starts_its_limits_anew(mode: str) -> None:
    """LangGraph's ``InMemorySaver.delete_thread`` (an app's ``graph.checkpointer``): the
    thread begun again under its id counts its new runs only. Before, its third run stopped at
    the thread's limit on the deleted runs' model calls."""
    saver = InMemorySaver()

    def limited() -> str:
        graph = build_graph(
            ScriptedChatModel(replies=[call("lookup", q="x"), "done"]), [lookup],
            policy=Policy(budget=Budget(thread_max_steps=3, max_steps=3)), checkpointer=saver,
        )  # fmt: skip
        out = graph.invoke({"goal": "look x up"}, {"configurable": {"thread_id": "t"}})
        return str(out["stop_reason"])

    assert [limited(), limited()] == ["success", "max_steps"]
    if mode == "sync":
        saver.delete_thread("t")
    else:
        asyncio.run(saver.adelete_thread("t"))
    assert limited() == "success"
