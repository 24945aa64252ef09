"""State survives the checkpointer's serializer and a real SQLite checkpointer, unchanged."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from gated_react import build_graph
from gated_react.state import State
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from .support.helpers import REFUND_42, REFUND_GOAL


def test_every_channel_round_trips_through_the_serializer(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "runs.sqlite", check_same_thread=False)
    graph = build_graph(
        ScriptedChatModel(replies=REFUND_42), SUPPORT_TOOLS, checkpointer=SqliteSaver(conn)
    )
    config: Any = {"configurable": {"thread_id": "serde"}}
    graph.invoke({"goal": REFUND_GOAL}, config)
    values = graph.get_state(config).values
    serde = JsonPlusSerializer()
    for name, value in values.items():
        assert serde.loads_typed(serde.dumps_typed(value)) == value, name
        assert isinstance(value, dict | list | str | int | float | bool | type(None)), name
    assert State.model_validate(values).stop_reason == "success"
    conn.close()


def test_state_read_back_in_a_new_saver_equals_the_result(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = build_graph(
            ScriptedChatModel(replies=REFUND_42), SUPPORT_TOOLS, checkpointer=SqliteSaver(conn)
        )
        out = graph.invoke({"goal": REFUND_GOAL}, {"configurable": {"thread_id": "t"}})
    with sqlite3.connect(path, check_same_thread=False) as conn:
        reader = build_graph(
            ScriptedChatModel(replies=[]), SUPPORT_TOOLS, checkpointer=SqliteSaver(conn)
        )
        values = reader.get_state({"configurable": {"thread_id": "t"}}).values
    assert {k: values[k] for k in out} == out


def _stored_bytes(tmp_path: Path, steps: int) -> int:
    """What a run of ``steps`` tool steps with 1 KB results leaves in a SQLite store."""
    from langchain_core.tools import tool

    from gated_react import Policy
    from gated_react.testing import call

    @tool
    def blob(n: int) -> str:
        """A 1 KB result."""
        return f"{n:04d}" + "x" * 1020

    path = tmp_path / f"runs-{steps}.sqlite"
    model = ScriptedChatModel(replies=[*(call("blob", n=i) for i in range(steps)), "done"])
    policy = Policy().replace(max_steps=steps + 1, max_tool_calls=steps + 1)
    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = build_graph(model, [blob], policy=policy, checkpointer=SqliteSaver(conn))
        out = graph.invoke({"goal": "go"}, {"configurable": {"thread_id": "t"}})
        assert len(out["messages"]) == 2 * steps + 2  # every call and its result
        rows = conn.execute(
            "SELECT (SELECT sum(length(checkpoint)) FROM checkpoints)"
            " + (SELECT sum(length(value)) FROM writes)"
        ).fetchone()
    return int(rows[0])


def test_messages_with_every_tool_step_grow_the_store_linearly(tmp_path: Path) -> None:
    """``messages`` holds each step's call and result: as a plain ``add_messages`` channel each
    checkpoint stored the whole conversation again (measured: 11.3 MB after 50 steps, 41.8 MB
    after 100); as a delta channel, 1.6 MB and 3.4 MB."""
    short, long = _stored_bytes(tmp_path, 20), _stored_bytes(tmp_path, 40)
    assert long < 2.4 * short  # twice the steps: about twice the bytes, not four times
