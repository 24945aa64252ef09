"""LangGraph's ``delete_thread`` on the savers ``open_checkpointer`` and ``aopen_checkpointer``
hand out deletes the thread's run records too: its own and its subgraphs', never another
thread's, on each of the four savers; a thread deleted so and begun again under its id starts
its limits anew, in the process that ran it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.base import empty_checkpoint

from gated_react import Budget, Policy, build_graph
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.authority.sql import backend_for
from gated_react.store.checkpointer import aopen_checkpointer, open_checkpointer
from gated_react.store.forget import forgetting
from gated_react.store.locks import ThreadBusy, athread_lock, thread_lock
from gated_react.store.signed import unwrapped
from gated_react.testing import ScriptedChatModel, call

from ..support.helpers import as_subgraph

KEY = "k" * 32
THREAD = "t"
OWN = [THREAD, "t|agent:1", "t|agent:1|inner:2"]  # its own records and its subgraphs'
OTHERS = ["t||b", "t||b|agent:3", "t||", "tx", "u"]  # threads "t|b" (and its subgraph), "t|"


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def is_async(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@asynccontextmanager
async def opened(url: str, is_async: bool) -> AsyncIterator[Any]:
    """The saver the store's opener gives (signed with ``KEY``), in either mode."""
    if is_async:
        async with aopen_checkpointer(url, key=KEY) as saver:
            yield saver
    else:
        with open_checkpointer(url, key=KEY) as saver:
            yield saver


async def _call(is_async: bool, saver: Any, name: str, *args: Any) -> Any:
    if is_async:
        return await getattr(saver, f"a{name}")(*args)
    return getattr(saver, name)(*args)


def _checkpoint(thread: str) -> tuple[Any, ...]:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return config, empty_checkpoint(), {"source": "input", "step": -1}, {}


async def _record_threads(is_async: bool, saver: Any) -> list[str]:
    backend = backend_for(unwrapped(saver))
    assert backend is not None
    rows = await _call(is_async, backend, "about", ["k"])
    return sorted({record.thread for record in rows})


def test_a_deleted_threads_records_go_and_no_other_threads(store_url: str, is_async: bool) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        async with opened(store_url, is_async) as saver:
            for thread in (THREAD, "t|b", "tx", "u"):  # "t|" has its records, no checkpoint
                await _call(is_async, saver, "put", *_checkpoint(thread))
            backend = backend_for(unwrapped(saver))
            wrote = [Record(t, "r", Kind.OPENED, "k", {}) for t in [*OWN, *OTHERS]]
            await _call(is_async, backend, "insert", wrote)
            await _call(is_async, saver, "delete_thread", THREAD)
            left = await _record_threads(is_async, saver)
            await _call(is_async, saver, "delete_thread", "nowhere")  # nothing to delete
            return left, await _record_threads(is_async, saver)

    left, again = asyncio.run(scenario())
    assert left == again == sorted(OTHERS)


def test_a_store_no_run_wrote_to_deletes_a_thread(store_url: str, is_async: bool) -> None:
    """Before any run, the records table does not exist: nothing to delete, nothing made."""

    async def scenario() -> None:
        async with opened(store_url, is_async) as saver:
            await _call(is_async, saver, "put", *_checkpoint(THREAD))
            await _call(is_async, saver, "delete_thread", THREAD)
            assert await _call(is_async, saver, "get_tuple", _checkpoint(THREAD)[0]) is None

    asyncio.run(scenario())


def test_the_program_asks_for_the_table_first_and_stops_without_it() -> None:
    program = forgetting("?", THREAD)
    sql, args = next(program)
    assert "sqlite_master" in sql
    assert list(args) == ["gated_react_records"]
    with pytest.raises(StopIteration):
        program.send([])


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def _graph(saver: Any) -> Any:
    """2 model calls a run under limits of 3, the thread's and the run's (a run begun again
    after a delete has a deleted run's id: the same question at the same place)."""
    budget = Budget(thread_max_steps=3, max_steps=3)
    return build_graph(
        ScriptedChatModel(replies=[call("lookup", q="x"), "done"], cycle=True), [lookup],
        policy=Policy(allow=frozenset({"lookup"}), budget=budget), checkpointer=saver,
    )  # fmt: skip


def test_a_thread_deleted_through_langgraph_and_begun_again_starts_its_limits_anew(
    store_url: str, is_async: bool
) -> None:
    """Before: LangGraph's delete_thread kept the records, and the thread begun again under its
    id stopped at once on the deleted runs' model calls (``max_steps``)."""
    question = {"goal": "look x up"}
    config = {"configurable": {"thread_id": THREAD}}

    async def ended(graph: Any) -> str:
        if is_async:
            return str((await graph.ainvoke(question, config))["stop_reason"])
        return str(graph.invoke(question, config)["stop_reason"])

    async def scenario() -> list[str]:
        async with opened(store_url, is_async) as saver:
            graph = _graph(saver)
            seen = [await ended(graph), await ended(graph)]
            await _call(is_async, graph.checkpointer, "delete_thread", THREAD)
            return [*seen, await ended(graph)]

    assert asyncio.run(scenario()) == ["success", "max_steps", "success"]


def test_a_sqlite_backend_reads_its_deleted_rows_no_more(tmp_path: Path, is_async: bool) -> None:
    """The SQLite backend keeps the rows it inserted since a run's last read, to give them
    back without a query (its tail): a delete through the saver's connection is not its write
    and changes no ``data_version``; what it kept of the thread is read from the table again."""

    async def scenario() -> list[Record]:
        async with opened(f"sqlite:///{tmp_path / 'runs.sqlite'}", is_async) as saver:
            backend = backend_for(unwrapped(saver))
            assert await _call(is_async, backend, "after", THREAD, "r", 0) == []  # tail from 0
            await _call(is_async, backend, "insert", [Record(THREAD, "r", Kind.OPENED, "k", {})])
            await _call(is_async, saver, "delete_thread", THREAD)
            return list(await _call(is_async, backend, "after", THREAD, "r", 0))

    assert asyncio.run(scenario()) == []


PAID: list[int] = []


@tool
def pay(amount: int) -> str:
    """Pay an amount (not idempotent: it runs at most once per call)."""
    PAID.append(amount)
    return "paid"


def test_a_thread_named_like_another_threads_subgraph_shares_nothing_with_it(
    store_url: str,
) -> None:
    """Thread ``P`` runs the agent as its node ``agent``; a thread named ``P|agent`` is another
    thread. Before, both kept their records under ``P|agent``: the thread counted the
    subgraph's model calls (it stopped ``max_steps`` on its first run), and deleting it deleted
    the subgraph's record, so a replay of ``P`` from before the node paid again."""
    PAID.clear()
    policy = Policy(budget=Budget(thread_max_steps=2))
    model = ScriptedChatModel(replies=[call("pay", amount=49), "done"], cycle=True)
    with open_checkpointer(store_url, key=KEY) as saver:
        parent = as_subgraph(build_graph(model, [pay]), saver)
        config: Any = {"configurable": {"thread_id": "P"}}
        parent.invoke({"messages": [("user", "pay 49")]}, config)
        assert PAID == [49]
        named = build_graph(model, [pay], policy=policy, checkpointer=saver)
        ran = named.invoke({"goal": "pay 49"}, {"configurable": {"thread_id": "P|agent"}})
        assert ran["stop_reason"] == "success"  # its own 2 model calls, not P's as well
        saver.delete_thread("P|agent")
        before = next(s for s in parent.get_state_history(config) if s.next == ("agent",))
        replayed = parent.invoke(None, before.config)
    assert replayed["messages"][-1].text == "done"
    assert PAID == [49, 49]  # P's payment once, the other thread's once: none paid again


def test_a_thread_a_run_advances_is_not_deleted(store_url: str, is_async: bool) -> None:
    """As ``gated-react delete`` leaves it: a run holding the thread's lock (in this process
    or another) gets to finish it. Before, the checkpoints and records went under the run,
    which wrote on into the thread: a thread that existed again without the records that
    counted its calls."""

    async def scenario() -> tuple[str, bool, list[str]]:
        async with opened(store_url, is_async) as saver:
            await _call(is_async, saver, "put", *_checkpoint(THREAD))
            backend = backend_for(unwrapped(saver))
            await _call(is_async, backend, "insert", [Record(THREAD, "r", Kind.OPENED, "k", {})])
            held = athread_lock(saver, THREAD) if is_async else _async(thread_lock(saver, THREAD))
            async with held:
                with pytest.raises(ThreadBusy) as refused:
                    await _call(is_async, saver, "delete_thread", THREAD)
            kept = await _call(is_async, saver, "get_tuple", _checkpoint(THREAD)[0]) is not None
            return str(refused.value), kept, await _record_threads(is_async, saver)

    said, kept, left = asyncio.run(scenario())
    assert said == f"thread {THREAD!r} is being advanced by another run; nothing was changed"
    assert kept
    assert left == [THREAD]


@asynccontextmanager
async def _async(held: Any) -> AsyncIterator[None]:
    with held:
        yield
