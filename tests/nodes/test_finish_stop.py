"""finish and stop: the two ends of a run, each written once, with the run's end in its record."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from gated_react import build_graph, read
from gated_react._engine.conversation.steps import ending
from gated_react.errors import MisroutedStep
from gated_react.nodes.finish import finish
from gated_react.nodes.stop import stop
from gated_react.state import Step
from gated_react.stops import Stop, StopReason
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import state
from .hand import paid_steps as paid
from .hand import proposal, records, saved


def _finished(steps: int, **step: Any) -> tuple[dict[str, Any], Any]:
    """finish's update in a run of ``steps`` model calls; and its config."""
    config = saved()
    paid(config, steps)
    return finish(state(**step), config), config


def test_finish_writes_success_and_the_answer_and_records_the_end() -> None:
    update, config = _finished(4, answer={"text": "USD 49"})
    assert update["messages"][0].id  # set here, so the stream and the thread name it alike
    update["messages"][0].id = None
    assert update == {
        "status": "ok",
        "stop_reason": "success",
        "message": "final answer after 4 steps",
        "structured_response": None,  # no answer schema
        "messages": [AIMessage("USD 49")],  # the conversation's answer
    }
    end = records(config)[-1]
    assert (end.kind, end.body["reason"]) == ("ended", "success")


def test_finish_under_an_answer_schema_writes_its_data() -> None:
    answered = state(answer={"text": '{"amount": 49.0}', "data": {"amount": 49.0}})
    assert finish(answered)["structured_response"] == {"amount": 49.0}


def test_stop_writes_stopped_and_says_why_as_the_agent() -> None:
    config = saved()
    stopped = state(ending={"reason": "max_steps", "message": "max_steps 8 reached (9 requested)"})
    update = stop(stopped, config)
    assert update["messages"][0].id
    update["messages"][0].id = None
    assert update == {
        "status": "stopped",
        "stop_reason": "max_steps",
        "structured_response": None,
        "message": "max_steps 8 reached (9 requested)",
        "messages": [
            AIMessage(
                "I ran out of steps before I could finish. (max_steps 8 reached (9 requested).)"
            )
        ],
    }
    end = records(config)[-1]
    assert (end.kind, end.body["reason"]) == ("ended", "max_steps")


def test_stop_answers_the_calls_of_the_last_step_that_never_ran() -> None:
    """Every call keeps its one result: a call the run stopped before is answered as not run
    (marked so, and left out of the history)."""
    asked = proposal(("get_user_profile", {"user_id": 42}), ("get_user_billing", {"user_id": 42}))
    ran = ToolMessage("{}", tool_call_id="c1", name="get_user_profile", id="r1")
    current = state(
        messages=[asked["message"], ran], ending={"reason": "max_tool_calls", "message": "m"}
    )
    (answer, said) = stop(current, saved())["messages"]
    assert (answer.tool_call_id, answer.status) == ("c2", "error")
    assert answer.response_metadata == {"not_run": True}
    assert answer.text.startswith("not run: the run stopped (max_tool_calls)")
    assert said.type == "ai"


def test_an_answer_that_is_the_replys_text_is_stored_under_the_replys_id() -> None:
    """What streamed from the model is the message the thread keeps (native tool calling)."""
    reply = {"id": "lc_run--1", "text": " USD 49 "}
    answered = state(answer={"text": "USD 49"}, reply=reply)
    assert finish(answered)["messages"][0].id == "lc_run--1"
    rewritten = state(answer={"text": '{"usd":49}'}, reply=reply)
    assert finish(rewritten)["messages"][0].id != "lc_run--1"


def test_finish_counts_one_step_in_the_singular() -> None:
    assert _finished(1, answer={"text": "x"})[0]["message"] == "final answer after 1 step"


def test_stop_falls_back_to_the_reason_when_no_message_was_written() -> None:
    held = ending(Step(run="q-1"), Stop(StopReason.LOOP_DETECTED))
    assert stop(state(**held["step"]))["message"] == "loop_detected"


def test_both_refuse_to_run_out_of_place() -> None:
    with pytest.raises(MisroutedStep, match=r"^finish was reached without a final answer, "):
        finish(state())
    calls = [{"id": "c1", "tool": "t", "args": {}}]
    with pytest.raises(MisroutedStep, match=r"send a new message \(or goal\)"):
        finish(state(calls=calls))
    with pytest.raises(MisroutedStep, match=r"^stop was reached with no stop reason recorded, "):
        stop(state())


CFG: Any = {"configurable": {"thread_id": "t"}}


@pytest.mark.parametrize(
    "node",
    [
        "decide",
        "validate",
        pytest.param("gate"),
        pytest.param("execute"),
        "observe",
        "finish",
        "stop",
    ],
)
def test_an_edit_of_a_finished_thread_keeps_its_answer(node: str) -> None:
    """Before: an edit of another channel as any node, then a run, went to stop (the stop
    reason was still set), which wrote status "stopped" and erased the answer. Now the run's
    end stands, nothing is said twice, and an edit that sends the thread where a step with
    no calls cannot go is refused in one line."""
    graph = build_graph(ScriptedChatModel(replies=["USD 49"]), [], checkpointer=InMemorySaver())
    graph.invoke({"goal": "refund?"}, CFG)
    graph.update_state(CFG, {"message": "looked at in Studio"}, as_node=node)
    if node in ("gate", "execute"):  # observe would take the answer's step for calls
        with pytest.raises(MisroutedStep, match=r"^observe was reached with calls that never ran"):
            graph.invoke(None, CFG)
        after = graph.get_state(CFG).values
    else:
        after = graph.invoke(None, CFG)
    result = read(graph, "t")
    assert [result[k] for k in ("status", "stop_reason", "answer")] == ["ok", "success", "USD 49"]
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
    """The conversation ends with the tool's message, as under ``create_agent``: no AI
    message repeats it."""
    said = "lookup_order returned directly (return_direct) after 1 step"
    calls = [{"id": "c", "tool": "lookup_order", "args": {"order_id": 7}}]
    update, _ = _finished(1, calls=calls, answer={"text": "Order 7: shipped", "direct": True})
    assert update == {
        "structured_response": None,
        "status": "ok",
        "stop_reason": "success",
        "message": said,
    }
    with pytest.raises(MisroutedStep, match="final answer"):
        finish(state(calls=calls))


def test_an_answer_that_streamed_is_stored_as_it_streamed_ends_included() -> None:
    """Before: "It is sunny.\\n" streamed, "It is sunny." was stored under the same id, so the
    chunks joined were not the stored message (create_agent stores the text as written)."""
    written = "It is sunny.\n"
    update = finish(
        state(
            reply={"id": "r1", "text": written, "tool_calls": []}, answer={"text": "It is sunny."}
        )
    )
    (message,) = update["messages"]
    assert (message.id, message.text) == ("r1", written)
