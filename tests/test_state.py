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
