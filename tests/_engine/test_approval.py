"""Human approval through LangGraph's interrupt(): approve, reject, edit, and malformed answers."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from gated_react import build_graph
from gated_react._engine.approval import parse_answer
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import policy


def _paused(replies: list[Any], thread: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    graph = build_graph(
        ScriptedChatModel(replies=replies),
        SUPPORT_TOOLS,
        policy=policy(require_approval=frozenset({"get_user_billing"})),
        checkpointer=InMemorySaver(),
    )
    config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    first = graph.invoke({"goal": "refund?"}, config)
    return graph, config, first


def test_the_run_pauses_with_the_question_and_continues_when_approved() -> None:
    graph, config, first = _paused([call("get_user_billing", user_id=42), "USD 49"], "approve")
    question = first["__interrupt__"][0].value
    assert question["tool"] == "get_user_billing"
    assert question["args"] == {"user_id": 42}
    assert question["step"] == 1
    assert "approve" in question["why"]
    assert first.get("status") is None
    out = graph.invoke(Command(resume={"approved": True}), config)
    assert out["stop_reason"] == "success"
    assert out["history"][0]["observation"]["billing"]["price_usd"] == 49.0


def test_rejection_stops_with_the_reason() -> None:
    graph, config, _ = _paused([call("get_user_billing", user_id=42)], "reject")
    out = graph.invoke(Command(resume={"approved": False, "reason": "not today"}), config)
    assert out["stop_reason"] == "tool_rejected:get_user_billing"
    assert "not today" in out["message"]
    assert out["trace"][-1]["stop_reason"] == "tool_rejected:get_user_billing"


def test_edited_args_run_instead() -> None:
    graph, config, _ = _paused([call("get_user_billing", user_id=42), "done"], "edit")
    out = graph.invoke(Command(resume={"approved": True, "args": {"user_id": 7}}), config)
    assert out["history"][0]["action"]["args"] == {"user_id": 7}
    assert out["history"][0]["observation"]["billing"]["plan"] == "free"


def test_edited_args_are_gated_again() -> None:
    replies = [call("get_user_billing", user_id=7), call("get_user_billing", user_id=42)]
    graph, config, _ = _paused(replies, "edit-loop")
    graph.invoke(Command(resume={"approved": True}), config)
    out = graph.invoke(Command(resume={"approved": True, "args": {"user_id": 7}}), config)
    assert out["stop_reason"] == "loop_detected"


def test_edited_args_are_validated_by_the_tool_schema() -> None:
    graph, config, _ = _paused([call("get_user_billing", user_id=42)], "edit-bad")
    out = graph.invoke(Command(resume={"approved": True, "args": {"user_id": "x"}}), config)
    assert out["stop_reason"] == "tool_bad_args:get_user_billing"


def test_a_malformed_answer_asks_again() -> None:
    graph, config, _ = _paused([call("get_user_billing", user_id=42), "fine"], "malformed")
    again = graph.invoke(Command(resume="yes please"), config)
    question = again["__interrupt__"][0].value
    assert "not understood" in question["error"]
    out = graph.invoke(Command(resume={"approved": True}), config)
    assert out["stop_reason"] == "success"


@pytest.mark.parametrize(
    "value",
    [
        None,
        "yes",
        {"approved": "yes"},
        {"approved": True, "args": [1]},
        {"approved": False, "args": {}},
        {"approved": True, "sudo": True},
        {"approved": False, "reason": 5},
        {"approved": True, "args": {"user_id": 10**30}},
    ],
)
def test_parse_answer_rejects_malformed_values(value: Any) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 (the message varies by case)
        parse_answer(value)
