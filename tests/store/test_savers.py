"""The savers aopen_checkpointer hands out, as the LangGraph server uses them: a run's
checkpoints deleted (``multitask_strategy="rollback"``), threads pruned."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from gated_react import build_graph
from gated_react.store.checkpointer import aopen_checkpointer
from gated_react.store.signed import unwrapped
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import REFUND_42, REFUND_GOAL


def _config(thread: str, run: str) -> Any:
    return {"configurable": {"thread_id": thread}, "metadata": {"run_id": run}}


async def _two_runs(url: str) -> tuple[Any, Any, Any]:
    async with aopen_checkpointer(url) as saver:
        graph = build_graph(ScriptedChatModel(replies=["Hi.", *REFUND_42]), SUPPORT_TOOLS)
        graph = graph.copy(update={"checkpointer": saver})
        await graph.ainvoke({"goal": "Say hi."}, _config("t", "run-1"))
        kept = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
        await graph.ainvoke({"goal": REFUND_GOAL}, _config("t", "run-2"))
        await graph.ainvoke({"goal": "Say hi."}, _config("u", "run-3"))
        await saver.adelete_for_runs(["run-2"])
        after = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
        runs = {c.metadata.get("run_id") async for c in saver.alist(None)}
        shown = (await graph.aget_state({"configurable": {"thread_id": "t"}})).values
        return (kept, after), runs, shown


def test_deleting_a_run_leaves_the_thread_as_it_was_before_it(tmp_path: Path) -> None:
    (kept, after), runs, shown = asyncio.run(_two_runs(f"sqlite:///{tmp_path}/runs.sqlite"))
    assert runs == {"run-1", "run-3"}
    assert after.config == kept.config
    assert [m.text for m in shown["messages"]] == ["Say hi.", "Hi."]
    assert (shown["status"], shown["message"]) == ("ok", "final answer after 1 step")


async def _pruned(url: str, strategy: str) -> list[str]:
    async with aopen_checkpointer(url) as saver:
        graph = build_graph(ScriptedChatModel(replies=["Hi."], cycle=True), SUPPORT_TOOLS)
        graph = graph.copy(update={"checkpointer": saver})
        for thread in ("a", "b"):
            await graph.ainvoke({"goal": "Say hi."}, _config(thread, thread))
        await saver.aprune(["a"], strategy=strategy)
        return sorted({c.config["configurable"]["thread_id"] async for c in saver.alist(None)})


@pytest.mark.parametrize("strategy", ["delete", "delete_all"])
def test_pruning_deletes_the_threads(tmp_path: Path, strategy: str) -> None:
    assert asyncio.run(_pruned(f"sqlite:///{tmp_path}/runs.sqlite", strategy)) == ["b"]


def test_keep_latest_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(NotImplementedError, match="a delta channel"):
        asyncio.run(_pruned(f"sqlite:///{tmp_path}/runs.sqlite", "keep_latest"))


def _checkpoint(n: int) -> tuple[Any, Any]:
    """A config and checkpoint to put as the ``n``-th of thread ``t``."""
    checkpoint = empty_checkpoint()
    checkpoint["id"] = f"0000000{n}"
    return {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint


def test_a_write_that_failed_on_a_busy_database_leaves_no_transaction(tmp_path: Path) -> None:
    """LangGraph's async SQLite saver opens its implicit transaction before a write, and a
    write refused by a busy database (or cancelled) left it open: the connection read an old
    snapshot, and its next write failed at once ("database is locked") once another connection
    had committed. The saver's lock is released only after that transaction is rolled back."""
    asyncio.run(_failed_write(tmp_path / "runs.sqlite"))


async def _failed_write(path: Path) -> None:
    async with aopen_checkpointer(str(path)) as saver:
        await saver.aput(*_checkpoint(1), {}, {})
        raw = unwrapped(saver)
        await raw.conn.execute("PRAGMA busy_timeout = 0")  # refused at once, not after 30 s
        with closing(sqlite3.connect(path, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                await saver.aput(*_checkpoint(2), {}, {})
            other.execute("COMMIT")
            other.execute("CREATE TABLE elsewhere (x)")  # another connection commits
        assert not raw.conn.in_transaction
        await saver.aput(*_checkpoint(3), {}, {})
        found = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
        assert found is not None
        assert found.checkpoint["id"] == "00000003"
