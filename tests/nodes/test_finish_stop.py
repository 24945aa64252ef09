from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel

from gated_react import Policy, build_graph
from gated_react.errors import MisroutedStep
from gated_react.nodes.finish import finish
from gated_react.nodes.stop import stop
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

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
    with pytest.raises(MisroutedStep, match=r"^finish was reached without a final answer, "):
        finish(state())
    tool = {"kind": "tool", "name": "t", "args": {}}
    with pytest.raises(MisroutedStep, match=r"send a new message \(or goal\)"):
        finish(state(action=tool))
    with pytest.raises(MisroutedStep, match=r"^stop was reached with no stop reason recorded, "):
        stop(state())


def test_an_ended_run_keeps_its_end_when_an_edit_reaches_either_again() -> None:
    """An edit of a finished thread routes to stop (its stop reason is still set): the answer
    and status stand, nothing is said twice."""
    ended = state(
        status="ok",
        stop_reason="success",
        answer="USD 49",
        action={"kind": "final", "answer": "USD 49"},
    )
    assert stop(ended) == {}
    assert finish(ended) == {}


CFG: Any = {"configurable": {"thread_id": "t"}}


@pytest.mark.parametrize("node", ["decide", "validate", "gate", "observe"])
def test_an_edit_of_a_finished_thread_keeps_its_answer(node: str) -> None:
    """Before: an edit of another channel as any node, then a run, went to stop (the stop
    reason was still set), which wrote status "stopped" and erased the answer."""
    graph = build_graph(ScriptedChatModel(replies=["USD 49"]), [], checkpointer=InMemorySaver())
    before = graph.invoke({"goal": "refund?"}, CFG)
    graph.update_state(CFG, {"goal": "refund?"}, as_node=node)
    after = graph.invoke(None, CFG)
    keys = ("status", "stop_reason", "answer")
    assert [after[k] for k in keys] == [before[k] for k in keys] == ["ok", "success", "USD 49"]
    assert [m.type for m in after["messages"]] == ["human", "ai"]  # nothing said twice


@pytest.mark.parametrize("node", ["finish", "stop"])
def test_a_command_to_an_end_mid_run_is_one_line_and_a_new_message_goes_on(node: str) -> None:
    model = ScriptedChatModel(replies=[call("get_user_profile", user_id=42), "done", "hi"])
    graph = build_graph(model, SUPPORT_TOOLS, checkpointer=InMemorySaver())
    graph.invoke({"goal": "who is 42?"}, CFG, interrupt_after=["observe"])
    with pytest.raises(MisroutedStep, match=rf"^{node} was reached "):
        graph.invoke(Command(goto=node), CFG)
    out = graph.invoke({"messages": [("user", "say hi")]}, CFG)
    assert out["stop_reason"] == "success"


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
    with pytest.raises(MisroutedStep, match="final answer"):
        finish(state(action={"kind": "tool", "name": "lookup_order", "args": {}}))


def test_an_answer_that_streamed_is_stored_as_it_streamed_ends_included() -> None:
    """Before: "It is sunny.\\n" streamed, "It is sunny." was stored under the same id, so the
    chunks joined were not the stored message (create_agent stores the text as written)."""
    written = "It is sunny.\n"
    update = finish(
        state(
            reply={"id": "r1", "text": written, "tool_calls": []},
            action={"kind": "final", "answer": "It is sunny."},
        )
    )
    (message,) = update["messages"]
    assert (message.id, message.text, update["answer"]) == ("r1", written, "It is sunny.")
