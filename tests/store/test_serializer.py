"""No code runs from a stored checkpoint: every checkpointer this package opens revives only the
types a run's state holds, refuses anything else in one line, and imports or calls nothing."""

from __future__ import annotations

import asyncio
import pickle
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from gated_react import (
    Policy,
    UnsafeCheckpoint,
    aopen_checkpointer,
    build_graph,
    open_checkpointer,
    read,
    resume,
    run,
)
from gated_react.state import RunInput
from gated_react.store.serializer import serializer
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.tamper import poison, touch

THREAD = {"configurable": {"thread_id": "t"}}


def _finished(saver: Any) -> Any:
    graph = build_graph(ScriptedChatModel(replies=["done"]), SUPPORT_TOOLS, checkpointer=saver)
    graph.invoke({"goal": "refund?"}, THREAD)
    return graph


def _named(module: str, name: str, arg: Any, code: int = 0) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb([module, name, arg]))


def _attacks(tmp: Path) -> dict[str, Any]:
    """Extension values that name a callable, each as a channel value: alone, inside a list,
    inside an allowed type, as a method call and as a DeltaChannel snapshot."""
    command = f"touch {tmp / 'x'}"
    message = ["langchain_core.messages.ai", "AIMessage", {"content": touch(tmp / "x")}]
    return {
        "constructor": touch(tmp / "x"),
        "positional": _named("os", "system", [command], code=1),
        "keywords": _named("subprocess", "run", {"args": ["touch", str(tmp / "x")]}, code=2),
        "method": ormsgpack.Ext(3, ormsgpack.packb(["subprocess", "os", command, "system"])),
        "pydantic": _named("os", "system", {"command": command}, code=5),
        "in a list": ["fine", {"deep": [touch(tmp / "x")]}],
        "inside an allowed type": ormsgpack.Ext(5, ormsgpack.packb(message)),
        "in a snapshot": ormsgpack.Ext(7, ormsgpack.packb([touch(tmp / "x")])),
        "unknown code": ormsgpack.Ext(42, b"\x00"),
    }


@pytest.mark.parametrize("attack", list(_attacks(Path("."))))
def test_a_checkpoint_that_names_a_callable_is_refused_and_runs_nothing(
    store_url: str, tmp_path: Path, attack: str
) -> None:
    with open_checkpointer(store_url) as saver:
        graph = _finished(saver)
        poison(saver, "t", {"answer": _attacks(tmp_path)[attack]})
        with pytest.raises(UnsafeCheckpoint) as refused:
            read(graph, "t")
        with pytest.raises(UnsafeCheckpoint):
            graph.get_state_history(THREAD).__next__()
    message = str(refused.value)
    assert "\n" not in message
    assert "does not revive" in message or "not revive" in message
    assert not (tmp_path / "x").exists()


def test_the_async_checkpointer_refuses_the_same(tmp_path: Path) -> None:
    url = str(tmp_path / "runs.sqlite")
    with open_checkpointer(url) as saver:
        _finished(saver)
        poison(saver, "t", {"answer": touch(tmp_path / "x")})

    async def reading() -> None:
        async with aopen_checkpointer(url) as saver:
            graph = build_graph(ScriptedChatModel(replies=[]), SUPPORT_TOOLS, checkpointer=saver)
            await graph.aget_state(THREAD)

    with pytest.raises(UnsafeCheckpoint, match=r"os\.system"):
        asyncio.run(reading())
    assert not (tmp_path / "x").exists()


class _Runs:
    """Pickled, it runs ``touch`` when unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize("kind", ["pickle", "json"])
def test_payload_kinds_we_never_write_are_refused(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "runs.sqlite"
    with open_checkpointer(str(db)) as saver:
        _finished(saver)
    payload = pickle.dumps(_Runs(tmp_path / "x")) if kind == "pickle" else b'{"lc": 2}'
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE checkpoints SET type = ?, checkpoint = ?", (kind, payload))
    conn.close()
    with open_checkpointer(str(db)) as saver:
        graph = build_graph(ScriptedChatModel(replies=[]), SUPPORT_TOOLS, checkpointer=saver)
        with pytest.raises(UnsafeCheckpoint, match=f"a '{kind}' value"):
            read(graph, "t")
    assert not (tmp_path / "x").exists()


def test_an_honest_run_loads_whole_chat_approval_resume_and_input_models(
    store_url: str,
) -> None:
    """Everything LangGraph and our nodes store comes back, and nothing is refused or even
    warned about: messages, interrupts, resume commands, an input passed as ``RunInput``."""
    events: list[Any] = []
    unregister = register_serde_event_listener(events.append)
    try:
        approval = Policy(require_approval=frozenset({"get_user_billing"}))
        replies = [call("get_user_profile", user_id=42), call("get_user_billing", user_id=42)]
        with open_checkpointer(store_url) as saver:
            model = ScriptedChatModel(replies=[*replies, "USD 49"])
            graph = build_graph(model, SUPPORT_TOOLS, policy=approval, checkpointer=saver)
            chat = [HumanMessage("hi"), AIMessage("hello"), HumanMessage("refund?")]
            paused = graph.invoke({"messages": chat}, THREAD)
            assert paused["__interrupt__"]
            done = resume(graph, "t", {"approved": True})
            other = build_graph(
                ScriptedChatModel(replies=["yes"]), SUPPORT_TOOLS, checkpointer=saver
            )
            other.invoke(RunInput(goal="and again?"), {"configurable": {"thread_id": "u"}})
        with open_checkpointer(store_url) as saver:
            graph = build_graph(ScriptedChatModel(replies=[]), SUPPORT_TOOLS, checkpointer=saver)
            again = read(graph, "t")
            history = list(graph.get_state_history(THREAD))
            assert read(graph, "u")["status"] == "ok"
    finally:
        unregister()
    assert done["stop_reason"] == again["stop_reason"] == "success"
    assert again["messages"] == done["messages"]
    assert [m.content for m in again["messages"][:3]] == ["hi", "hello", "refund?"]
    assert len(history) > 10
    assert any(task.interrupts for snapshot in history for task in snapshot.tasks)
    assert events == []


@dataclass
class Point:
    x: int
    y: int


class Shapes(TypedDict):
    point: Any


def _keep(state: Shapes) -> Shapes:
    return state


def test_a_users_own_type_is_refused_until_allowed(tmp_path: Path) -> None:
    url = str(tmp_path / "runs.sqlite")
    builder = StateGraph(Shapes)
    builder.add_node("keep", _keep)
    builder.add_edge(START, "keep")
    builder.add_edge("keep", END)
    with open_checkpointer(url) as saver:
        builder.compile(checkpointer=saver).invoke({"point": Point(1, 2)}, THREAD)
    with open_checkpointer(url) as saver, pytest.raises(UnsafeCheckpoint) as refused:
        builder.compile(checkpointer=saver).get_state(THREAD)
    assert f"{__name__}.Point" in str(refused.value)
    assert "allow=" in str(refused.value)
    for allow in ([Point], [(__name__, "Point")]):
        with open_checkpointer(url, allow=allow) as saver:
            values = builder.compile(checkpointer=saver).get_state(THREAD).values
        assert values["point"] == Point(1, 2)


def test_the_serializer_round_trips_what_state_holds() -> None:
    serde = serializer()
    values = [HumanMessage("hi", id="1"), RunInput(goal="g"), {"plain": [1, "two", None]}]
    assert serde.loads_typed(serde.dumps_typed(values)) == values


def test_an_answer_holding_a_type_the_store_will_not_revive_is_refused_not_stored(
    tmp_path: Path,
) -> None:
    """Stored as given, it would have made the thread unreadable for good."""
    approval = Policy(require_approval=frozenset({"get_user_billing"}))
    model = ScriptedChatModel(replies=[call("get_user_billing", user_id=42), "ok"])
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        graph = build_graph(model, SUPPORT_TOOLS, policy=approval, checkpointer=saver)
        run(graph, "refund?", thread_id="t")
        out = resume(graph, "t", {"approved": True, "args": {"user_id": Point(4, 2)}})
        assert out["status"] == "paused"
        assert "no store can hold it" in out["pending"][0]["error"]
        assert read(graph, "t")["status"] == "paused"
        assert resume(graph, "t", {"approved": True})["stop_reason"] == "success"


SAVER = re.compile(
    r"(?<!class )\b(?:(?:Async|Sync)?(?:Coalesced)?(?:Sqlite|Postgres|InMemory)(?:Saver|Store)"
    r"|saver_type)\(([^)]*)\)"
)


def test_every_saver_this_package_builds_reads_through_the_serializer() -> None:
    """A saver built without ``serde=`` revives anything: the workers' pooled saver once was."""
    source = Path(__file__).resolve().parents[2] / "src" / "gated_react"
    built = [
        (path.name, args)
        for path in source.rglob("*.py")
        for args in SAVER.findall(path.read_text())
    ]
    assert len(built) >= 9
    assert [(name, args) for name, args in built if "serde=" not in args] == []


def test_the_workers_pooled_saver_is_guarded() -> None:
    pytest.importorskip("psycopg_pool")
    from psycopg_pool import AsyncConnectionPool

    from gated_react.store.serializer import GuardedSerializer
    from gated_react.workers.connections import pool_saver

    async def built() -> Any:
        pool: Any = AsyncConnectionPool("postgresql://nobody@127.0.0.1:1/none", open=False)
        return pool_saver(pool).serde

    assert isinstance(asyncio.run(built()), GuardedSerializer)
