from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage
from pydantic import BaseModel

from gated_react import Policy
from gated_react.nodes.finish import finish
from gated_react.nodes.stop import stop
from gated_react.testing import ScriptedChatModel

from ..support.helpers import node_deps, state


def test_finish_writes_success_and_the_answer() -> None:
    update = finish(state(action={"kind": "final", "answer": "USD 49"}, usage={"steps": 4}))
    assert update["messages"][0].id  # set here, so the stream and the thread name it alike
    update["messages"][0].id = None
    assert update == {
        "status": "ok",
        "stop_reason": "success",
        "message": "final answer after 4 steps",
        "answer": "USD 49",
        "structured_response": None,  # no answer schema
        "messages": [AIMessage("USD 49")],  # the conversation's answer
    }


def test_finish_under_an_answer_schema_writes_its_data() -> None:
    class Refund(BaseModel):
        amount: float

    deps = node_deps(ScriptedChatModel(replies=[]), [], Policy(answer_schema=Refund))
    answered = state(action={"kind": "final", "answer": '{"amount": 49.0}'})
    assert finish(answered, deps=deps)["structured_response"] == {"amount": 49.0}


def test_stop_writes_stopped_and_no_answer() -> None:
    update = stop(state(stop_reason="max_steps", message="max_steps 8 reached (9 requested)"))
    assert update["messages"][0].id
    update["messages"][0].id = None
    assert update == {
        "status": "stopped",
        "answer": None,
        "structured_response": None,
        "message": "max_steps 8 reached (9 requested)",
        "messages": [
            AIMessage("I stopped before finishing (max_steps): max_steps 8 reached (9 requested)")
        ],
    }


def test_an_answer_that_is_the_replys_text_is_stored_under_the_replys_id() -> None:
    """What streamed from the model is the message the thread keeps (native tool calling)."""
    reply = {"id": "lc_run--1", "text": " USD 49 "}
    answered = state(action={"kind": "final", "answer": "USD 49"}, reply=reply)
    assert finish(answered)["messages"][0].id == "lc_run--1"
    rewritten = state(action={"kind": "final", "answer": '{"usd":49}'}, reply=reply)
    assert finish(rewritten)["messages"][0].id != "lc_run--1"


def test_finish_counts_one_step_in_the_singular() -> None:
    update = finish(state(action={"kind": "final", "answer": "x"}, usage={"steps": 1}))
    assert update["message"] == "final answer after 1 step"


def test_stop_falls_back_to_the_reason_when_no_message_was_written() -> None:
    assert stop(state(stop_reason="loop_detected"))["message"] == "loop_detected"


def test_both_refuse_to_run_out_of_place() -> None:
    with pytest.raises(
        TypeError, match=r"^finish runs only after validate produced a final answer$"
    ):
        finish(state())
    tool = {"kind": "tool", "name": "t", "args": {}}
    with pytest.raises(TypeError, match=r"^finish runs only after"):
        finish(state(action=tool))
    with pytest.raises(TypeError, match=r"^stop runs only after a node recorded a stop_reason$"):
        stop(state())


def test_finish_after_a_return_direct_tool_keeps_its_result_as_the_answer() -> None:
    """observe wrote the success; the conversation ends with the tool's message, as under
    ``create_agent``: no AI message repeats it."""
    said = "lookup_order returned directly (return_direct) after 1 step"
    ended = state(
        action={"kind": "tool", "name": "lookup_order", "args": {"order_id": 7}},
        stop_reason="success",
        message=said,
        answer="Order 7: shipped",
    )
    assert finish(ended) == {
        "structured_response": None,
        "status": "ok",
        "stop_reason": "success",
        "message": said,
        "answer": "Order 7: shipped",
    }
    with pytest.raises(TypeError, match="final answer"):
        finish(state(action={"kind": "tool", "name": "lookup_order", "args": {}}))
