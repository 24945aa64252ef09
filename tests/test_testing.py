from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage

from gated_react.testing import ScriptedChatModel, call


def test_replies_in_order_and_requests_are_kept() -> None:
    model = ScriptedChatModel(replies=["a", call("t", x=1), lambda msgs: f"saw {len(msgs)}"])
    assert model.invoke([HumanMessage("1")]).content == "a"
    assert model.bind_tools([]).invoke([HumanMessage("2")]).tool_calls[0]["args"] == {"x": 1}  # type: ignore[attr-defined]
    assert asyncio.run(model.ainvoke([HumanMessage("3"), HumanMessage("4")])).content == "saw 2"
    assert len(model.requests) == 3
    with pytest.raises(RuntimeError, match="exhausted after 3"):
        model.invoke([HumanMessage("5")])


def test_exceptions_are_raised_and_cycle_repeats() -> None:
    model = ScriptedChatModel(replies=[ValueError("x"), "ok"], cycle=True)
    for _ in range(2):
        with pytest.raises(ValueError, match="x"):
            model.invoke("hi")
        assert model.invoke("hi").usage_metadata["total_tokens"] > 0  # type: ignore[index]
