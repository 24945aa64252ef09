"""The workers' saver commits the supersteps that run no tool together, and stores exactly
what the Postgres saver stores: the same chain, a call on disk before it runs, and a run
cancelled while checkpoints are held resumes from what was committed, each call made once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from gated_react import arun, build_graph
from gated_react._engine.langgraph_internals import CONFIG_KEY_DURABILITY
from gated_react.store.coalesced import CoalescedPostgresSaver, held
from gated_react.store.locks import ThreadBusy, athread_lock
from gated_react.store.postgres import pg_kwargs
from gated_react.store.serializer import serializer
from gated_react.testing import ScriptedChatModel, call

from ..support.scenarios import comparable


def _checkpoint(*branches: str, **values: Any) -> Any:
    return {"channel_values": {**{f"branch:to:{b}": None for b in branches}, **values}}


@pytest.mark.parametrize(
    ("branches", "holds"),
    [
        (("decide",), True),
        (("validate",), True),
        (("gate",), True),
        (("observe",), True),
        (("execute",), False),  # the call must be on disk before it runs
        (("finish",), False),
        (("stop",), False),
        ((), False),  # the run's end, or its input
        (("gate", "execute"), False),
    ],
)
def test_a_checkpoint_is_held_when_it_leads_to_quiet_nodes_only(
    branches: tuple[str, ...], holds: bool
) -> None:
    assert held(_checkpoint(*branches, goal="g")) is holds


def _graph(saver: Any, replies: list[Any], made: list[str]) -> Any:
    @tool
    def pay(order: str) -> str:
        """Pay an order."""
        made.append(order)
        return f"paid {order}"

    return build_graph(ScriptedChatModel(replies=replies), [pay], checkpointer=saver)


def _replies() -> list[Any]:
    """The script of a run: its calls' ids are its own (a second run is no replay of the first)."""
    return [call("pay", order="a"), call("pay", order="b"), "Both paid."]


@asynccontextmanager
async def _saver(url: str, coalesced: bool) -> AsyncIterator[AsyncPostgresSaver]:
    async with await psycopg.AsyncConnection.connect(url, **pg_kwargs()) as conn:
        kind = CoalescedPostgresSaver if coalesced else AsyncPostgresSaver
        saver = kind(conn, serde=serializer())  # type: ignore[arg-type]
        await saver.setup()
        yield saver


def _rows(url: str, thread: str) -> tuple[int, int, int]:
    with psycopg.connect(url) as conn:
        counts = [
            conn.execute(f"SELECT count(*) FROM {table} WHERE thread_id = %s", (thread,)).fetchone()
            for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
        ]
    return tuple(int(row[0]) for row in counts if row)  # type: ignore[return-value]


async def _run(
    url: str, thread: str, coalesced: bool, durability: str | None = None
) -> tuple[dict[str, Any], list[Any]]:
    made: list[str] = []
    async with _saver(url, coalesced) as saver:
        graph = _graph(saver, _replies(), made)
        if durability is not None:
            graph = graph.with_config(configurable={CONFIG_KEY_DURABILITY: durability})
        config = {"configurable": {"thread_id": thread}}
        result = dict(await arun(graph, "Pay a and b", thread_id=thread))
        history = [(s.next, s.metadata["step"]) async for s in graph.aget_state_history(config)]
        assert made == ["a", "b"]  # both paid, by this run
        return result, [history, getattr(saver, "commits", None)]


@pytest.mark.postgres
@pytest.mark.parametrize("durability", ["sync", None], ids=["sync", "default"])
def test_the_same_chain_is_stored_in_fewer_commits(pg_url: str, durability: str | None) -> None:
    """The plain saver commits 15 checkpoints and 14 tasks' writes one by one. Under
    ``durability="sync"`` each of the two steps costs two commits, and the run's input and its
    ending five. Under LangGraph's default (``"async"``, what a run gets), a task's writes may
    reach the saver before the checkpoint they follow, which then holds less back: 10 to 13
    commits, as the tasks happen to race."""
    plain, (plain_history, _) = asyncio.run(
        _run(pg_url, f"plain-{durability}", coalesced=False, durability=durability)
    )
    merged, (merged_history, commits) = asyncio.run(
        _run(pg_url, f"merged-{durability}", coalesced=True, durability=durability)
    )
    assert merged["stop_reason"] == plain["stop_reason"] == "success"
    assert comparable(merged) == comparable(plain)
    assert merged_history == plain_history  # every checkpoint, in order, with its next nodes
    assert _rows(pg_url, f"merged-{durability}") == _rows(pg_url, f"plain-{durability}")
    assert len(plain_history) == 15
    if durability == "sync":
        assert commits == 2 * 2 + 5
    else:
        assert commits < 15 + 14


@pytest.mark.postgres
def test_a_call_is_on_disk_before_it_runs(pg_url: str) -> None:
    seen: list[bool] = []

    @tool
    def pay(order: str) -> str:
        """Pay an order."""
        with psycopg.connect(pg_url, **pg_kwargs()) as conn:
            reader = PostgresSaver(conn, serde=serializer())  # type: ignore[arg-type]
            latest = reader.get_tuple({"configurable": {"thread_id": "t"}})
        assert latest is not None
        seen.append("branch:to:execute" in latest.checkpoint["channel_values"])
        return "paid"

    async def go() -> str:
        async with _saver(pg_url, coalesced=True) as saver:
            model = ScriptedChatModel(replies=_replies())
            graph = build_graph(model, [pay], checkpointer=saver)
            result = await graph.ainvoke({"goal": "g"}, {"configurable": {"thread_id": "t"}})
            return str(result["stop_reason"])

    assert asyncio.run(go()) == "success"
    assert seen == [True, True]


@pytest.mark.postgres
def test_a_run_cancelled_while_holding_resumes_from_what_was_committed(pg_url: str) -> None:
    made: list[str] = []
    config = {"configurable": {"thread_id": "t"}}
    running: list[asyncio.Future[Any]] = []
    loops: list[asyncio.AbstractEventLoop] = []

    def killed(messages: list[BaseMessage]) -> Any:  # the second model call: the worker dies
        # A reply function runs on a thread under ``ainvoke``: the task is cancelled on its
        # loop (``Task.cancel`` from another thread races the task's own steps).
        loops[0].call_soon_threadsafe(running[0].cancel)
        return "never used"

    async def cancelled() -> None:  # as a killed worker: nothing held is ever committed
        loops.append(asyncio.get_running_loop())
        async with _saver(pg_url, coalesced=True) as saver:
            graph = _graph(saver, [call("pay", order="a"), killed], made)
            running.append(asyncio.ensure_future(graph.ainvoke({"goal": "Pay a"}, config)))
            with pytest.raises(asyncio.CancelledError):
                await running[0]

    async def resumed(replies: list[Any]) -> dict[str, Any]:
        async with _saver(pg_url, coalesced=False) as saver:
            return dict(await _graph(saver, replies, made).ainvoke(None, config))

    asyncio.run(cancelled())
    result = asyncio.run(resumed(["Paid."]))
    assert made == ["a"]  # the committed result of the first call was used, not made again
    assert result["stop_reason"] == "success"
    assert result["messages"][-1].text == "Paid."


def test_the_saver_writes_only_through_its_cursor() -> None:
    """What the coalescing rests on: the Postgres saver's writes all enter ``_cursor`` with
    ``pipeline=True``, and its reads without it."""
    import inspect

    def calls(method: Callable[..., Any]) -> list[str]:
        source = inspect.getsource(method)
        return [line.strip() for line in source.splitlines() if "self._cursor(" in line]

    assert calls(AsyncPostgresSaver.aput) == ["async with self._cursor(pipeline=True) as cur:"]
    assert calls(AsyncPostgresSaver.aput_writes) == [
        "async with self._cursor(pipeline=True) as cur:"
    ]
    assert all("pipeline=True" not in line for line in calls(AsyncPostgresSaver.aget_tuple))
    assert all("conn.execute" not in line for line in inspect.getsource(AsyncPostgresSaver.aput))


async def _hold_one(saver: AsyncPostgresSaver, thread: str) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"branch:to:decide": None, "goal": "g"}
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    await saver.aput(config, checkpoint, {"source": "loop", "step": 0}, {})


@pytest.mark.postgres
def test_the_thread_lock_holds_and_what_is_held_lands_before_it_goes(
    pg_url: str,
) -> None:
    async def go(thread: str, fail: bool) -> None:
        async with _saver(pg_url, coalesced=True) as saver:
            with contextlib.suppress(RuntimeError):
                async with athread_lock(saver, thread):
                    await _hold_one(saver, thread)
                    assert _rows(pg_url, thread)[0] == 0  # held, not committed
                    async with _saver(pg_url, coalesced=False) as other:  # another worker
                        with pytest.raises(ThreadBusy):
                            async with athread_lock(other, thread):
                                pass
                    if fail:
                        raise RuntimeError("the run failed")

    asyncio.run(go("ended", fail=False))
    asyncio.run(go("failed", fail=True))
    assert _rows(pg_url, "ended")[0] == 1
    assert _rows(pg_url, "failed")[0] == 0
