from __future__ import annotations

import asyncio
import threading
from typing import Any

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


def test_a_reply_function_that_blocks_never_blocks_the_event_loop() -> None:
    """Before: under ``ainvoke`` a reply function ran on the event loop, so one that slept
    held every task on it (a deadline included: a 2 s budget ran 6.5 s)."""
    started, release = threading.Event(), threading.Event()

    def waits(messages: Any) -> str:
        started.set()
        # on the loop, nothing can set the event while this waits
        return "late" if release.wait(10) else "blocked the loop"

    async def main() -> str:
        model = ScriptedChatModel(replies=[waits])
        reply = asyncio.ensure_future(model.ainvoke("hi"))
        await asyncio.to_thread(started.wait, 10)
        release.set()  # what a task on the loop does while the reply is awaited
        return str((await reply).content)

    assert asyncio.run(main()) == "late"
