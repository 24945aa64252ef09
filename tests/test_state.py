"""State survives the checkpointer's serializer and a real SQLite checkpointer, unchanged."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, get_args, get_type_hints

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from gated_react import build_graph
from gated_react.state import (
    RESULT_KEYS,
    SUMMARY_KEYS,
    CoreState,
    RunResult,
    State,
    Status,
    ThreadResult,
    Usage,
    UsageDict,
)
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


def test_usage_dict_is_usage_field_by_field() -> None:
    """One declaration: the TypedDict view of ``Usage`` (what results hold) has its fields, in
    its order, with its types; a field added to one and not the other fails here."""
    view = get_type_hints(UsageDict)
    assert list(view) == list(Usage.model_fields)
    assert view == {name: field.annotation for name, field in Usage.model_fields.items()}


def test_the_results_share_their_keys_with_the_state() -> None:
    """``ThreadResult`` is ``RunResult``'s keys plus the thread and its questions; the keys that
    say how a run ended have one type in ``RunResult``, ``CoreState`` and ``ThreadResult``
    (which adds ``paused``, a status no state holds)."""
    thread = get_type_hints(ThreadResult)
    run = get_type_hints(RunResult)
    core = get_type_hints(CoreState)
    assert set(thread) == {*RESULT_KEYS, "thread_id", "pending"}
    assert list(RESULT_KEYS) == list(RunResult.model_fields)
    assert thread["usage"] is UsageDict
    assert run["usage"] is Usage
    assert core["usage"] is Usage
    for key in SUMMARY_KEYS:
        assert run[key] == core[key], key
        if key != "status":
            assert thread[key] == run[key], key
    statuses = {arg for part in get_args(thread["status"]) for arg in get_args(part)}
    assert statuses == {*get_args(Status), "paused"}
    assert type(None) in get_args(thread["status"])
