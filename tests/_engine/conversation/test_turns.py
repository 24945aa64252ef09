"""Runs on a thread, like turns of a chat: a run is named by the id of the human message it
answers. A message typed while a question waits is never lost: the waiting calls are answered
(not run, or of unknown outcome when the record says they started), the conversation says why
the run ended, and the new message starts a new run with fresh budgets (with
``{"messages": [...]}`` or ``{"goal": ...}``, sync and async). The same message again, under
its own id, is the same run, under the budgets it had."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from gated_react import Policy, aresult_of, build_graph
from gated_react._engine.authority.ledger import ledger_for
from gated_react._engine.authority.records import Kind
from gated_react._engine.conversation.chat import ran
from gated_react._engine.conversation.turns import (
    cut_short,
    goal_message_id,
    of_run,
    opening,
    question_at,
    run_of,
)
from gated_react.runs import saver_of
from gated_react.state import Step, dump
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ...support.fakes import Payments
from ...support.reaping import PATIENCE
from ...support.results import invoked

CONFIG: Any = {"configurable": {"thread_id": "chat"}}
BILLING = call("get_user_billing", user_id=42)
NOT_RUN = "not run (tool_rejected:get_user_billing): a new message came instead"
CUT = "I did not finish: a new message came before get_user_billing could be settled."


def _graph(model: ScriptedChatModel) -> Any:
    policy = Policy(require_approval=["get_user_billing"]).replace(max_steps=1)
    return build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=InMemorySaver())


def _goal_shown(model: ScriptedChatModel) -> str:
    """The goal in the last request (after the conversation, before the last-step note)."""
    return str(model.requests[-1][-1].content).split("\n\n")[0]


def _ended(graph: Any, question: Any) -> dict[str, Any]:
    """The end the record holds for the run that answers ``question`` (a run cut short)."""
    records = ledger_for(saver_of(graph)).book("chat", str(question.id)).records
    (end,) = [r.body for r in records if r.kind is Kind.ENDED]
    return end


def _check(out: dict[str, Any], graph: Any, old: str, new: str) -> None:
    assert (out["stop_reason"], out["answer"]) == ("success", "Hello.")
    assert out["usage"]["steps"] == 1  # fresh budgets: with the old run's, max_steps 1 stops it
    assert out["trace"] == []  # the new run let nothing through
    assert [(m.type, m.text) for m in out["messages"]] == [
        ("human", old),
        ("ai", ""),  # the call that waited, answered: every tool call id is
        ("tool", NOT_RUN),
        ("ai", CUT),
        ("human", new),
        ("ai", "Hello."),
    ]
    waited, answer = out["messages"][1:3]
    assert [c["id"] for c in waited.tool_calls] == [answer.tool_call_id]
    assert answer.status == "error"
    assert not ran(answer)  # no view of the run's calls takes it for a result
    assert _ended(graph, out["messages"][0])["reason"] == "tool_rejected"
    snapshot = graph.get_state(CONFIG)
    assert (snapshot.next, snapshot.interrupts) == ((), ())


@pytest.mark.parametrize("key", ["messages", "goal"])
def test_a_message_typed_while_a_question_waits_starts_a_new_run(key: str) -> None:
    model = ScriptedChatModel(replies=[BILLING, "Hello."])
    graph = _graph(model)

    def said(text: str) -> dict[str, Any]:
        return {"messages": [HumanMessage(text)]} if key == "messages" else {"goal": text}

    asked = graph.invoke(said("Bill user 42."), CONFIG)
    assert asked["__interrupt__"]
    out = invoked(graph, said("Never mind, say hello."), CONFIG)
    assert _goal_shown(model) == "Never mind, say hello."
    assert CUT in [m.text for m in model.requests[-1] if m.type == "ai"]
    _check(dict(out), graph, "Bill user 42.", "Never mind, say hello.")


def test_the_same_message_again_under_its_id_is_the_same_run_under_its_budgets() -> None:
    """Nothing new came (a client re-sending what the thread holds): the waiting call is
    answered as not run and the run goes on under the budgets it had (max_steps 1, spent by
    the first decision), checked before the model is asked again."""
    model = ScriptedChatModel(replies=[BILLING, "Hello."])
    graph = _graph(model)
    asked = HumanMessage("Bill user 42.", id="h1")
    graph.invoke({"messages": [asked]}, CONFIG)
    out = invoked(graph, {"messages": [asked]}, CONFIG)
    assert out["stop_reason"] == "max_steps"
    assert len(model.requests) == 1
    assert out["usage"]["steps"] == 1
    waited, answer = out["messages"][1:3]
    assert [c["id"] for c in waited.tool_calls] == [answer.tool_call_id]
    assert answer.text.startswith("not run: the run stopped (max_steps)")
    assert [m.id for m in out["messages"] if m.type == "human"] == ["h1"]


def test_the_same_goal_again_while_a_question_waits_ends_the_step_not_the_budgets() -> None:
    """Nothing new came: the waiting call is answered as not run and the run goes on under
    the budgets it had (max_steps 1, spent by the first decision), checked before the model
    is asked again. With fresh budgets, sending the same goal again would buy a model call and
    a tool call every time."""
    model = ScriptedChatModel(replies=[BILLING, "Hello."])
    graph = _graph(model)
    graph.invoke({"goal": "Bill user 42."}, CONFIG)
    out = invoked(graph, {"goal": "Bill user 42."}, CONFIG)
    assert out["stop_reason"] == "max_steps"
    assert len(model.requests) == 1
    assert out["usage"]["steps"] == 1
    waited, answer = out["messages"][1:3]
    assert [c["id"] for c in waited.tool_calls] == [answer.tool_call_id]
    assert not ran(answer)
    assert [m.type for m in out["messages"]].count("human") == 1  # no new question


def test_async_runs_the_same_way() -> None:
    model = ScriptedChatModel(replies=[BILLING, "Hello."])
    graph = _graph(model)

    async def main() -> dict[str, Any]:
        await graph.ainvoke({"messages": [HumanMessage("Bill user 42.")]}, CONFIG)
        out = await graph.ainvoke({"messages": [HumanMessage("Say hello.")]}, CONFIG)
        return dict(await aresult_of(graph, out, CONFIG))

    _check(asyncio.run(main()), graph, "Bill user 42.", "Say hello.")


WAITING = {"name": "get_user_billing", "args": {"user_id": 42}, "id": "c1"}


def _cut(started: dict[str, str | None]) -> tuple[list[Any], int]:
    messages = [
        HumanMessage("Bill user 42.", id="h1"),
        AIMessage("", tool_calls=[WAITING], id="a1"),
        HumanMessage("Stop.", id="h2"),
    ]
    rewritten, at = cut_short(messages, 2, [WAITING], started)
    return list(rewritten.value), at


def test_a_call_the_record_says_started_is_of_unknown_outcome_never_not_run() -> None:
    """A question after a crash in execute (or a cancel while the call ran): it may have run."""
    messages, at = _cut({"c1": None})
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai", "human"]
    assert (at, messages[at].id) == (4, "h2")
    answer, note = messages[2:4]
    assert (answer.tool_call_id, answer.status) == ("c1", "error")
    assert answer.text == (
        "outcome unknown (tool_outcome_unknown:get_user_billing): get_user_billing may have "
        "run, but the run ended before its result was recorded; a new message came instead. "
        "Find out whether it did before calling it again."
    )
    assert note.text == CUT
    assert "not run" not in answer.text


def test_a_call_the_record_says_finished_is_answered_with_its_result() -> None:
    messages, _ = _cut({"c1": '{"plan": "pro"}'})
    answer = messages[2]
    assert (answer.text, answer.status) == ('{"plan": "pro"}', "success")
    assert ran(answer)
    never, _ = _cut({})
    assert never[2].text == NOT_RUN
    assert not ran(never[2])


def test_a_call_cancelled_while_it_ran_is_never_said_not_to_have_run() -> None:
    """A chat client's stop button cancels the run while the tool runs; the tool finishes its
    side effect anyway. Before: the next message answered the call "not run
    (tool_outcome_unknown:send_email)", to the user and to the model, inviting a second email."""
    started, release = threading.Event(), threading.Event()

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        started.set()
        release.wait(PATIENCE)
        return f"sent to {to}"

    model = ScriptedChatModel(replies=[call("send_email", to="bob"), "Hello."])
    graph = build_graph(model, [send_email], checkpointer=InMemorySaver())

    async def main() -> dict[str, Any]:
        first = asyncio.create_task(
            graph.ainvoke({"messages": [HumanMessage("Email bob.")]}, CONFIG)
        )
        try:
            assert await asyncio.to_thread(started.wait, PATIENCE)
            first.cancel()  # what the server does when the client presses stop
            with contextlib.suppress(asyncio.CancelledError):
                await first
        finally:
            release.set()  # the tool finishes its side effect
        return dict(await graph.ainvoke({"messages": [HumanMessage("Say hello.")]}, CONFIG))

    out = asyncio.run(main())
    assert _ended(graph, out["messages"][0])["reason"] == "tool_outcome_unknown"
    result, note = out["messages"][2:4]
    assert (result.type, result.status) == ("tool", "error")
    assert result.text.startswith("outcome unknown (tool_outcome_unknown:send_email)")
    assert "may have run" in result.text
    assert note.text == "I did not finish: a new message came before send_email could be settled."
    shown = [m.text for m in model.requests[-1]]  # the model's next prompt says the same
    assert result.text in shown
    assert note.text in shown
    assert not any("not run" in text for text in [*shown, *(m.text for m in out["messages"])])


def test_a_continuing_run_is_left_alone() -> None:
    """The step in hand belongs to the question the conversation is on: nothing to open."""
    messages = [HumanMessage("Bill user 42.", id="h1"), AIMessage("", id="a1")]
    step = dump(Step(run="h1"))
    opened = opening(messages, None, step, thread="chat", saved=True)
    assert (opened.run, opened.new, opened.update, opened.waiting) == ("h1", False, {}, [])


def test_a_goal_becomes_the_question_a_run_is_named_by() -> None:
    opened = opening([], "Bill user 42.", None, thread="chat", saved=True)
    (asked,) = opened.update["messages"]
    assert isinstance(asked, HumanMessage)
    assert opened.run == asked.id == goal_message_id("chat", 0, "Bill user 42.", True)
    assert opened.new
    assert opened.update["goal"] is None  # input only: cleared once it is the question
    assert opened.update["step"] == dump(Step(run=opened.run))
    # a fork before the decision: the same run
    again = opening([], "Bill user 42.", None, thread="chat", saved=True)
    assert again.run == opened.run


def test_without_a_checkpointer_every_invocation_is_a_run_of_its_own() -> None:
    one = opening([], "hi", None, thread="", saved=False)
    two = opening([], "hi", None, thread="", saved=False)
    assert one.run != two.run
    question = str(one.update["messages"][0].id)
    assert one.run.startswith(f"{question}#")
    assert of_run(one.run, question, False)
    assert not of_run(question, question, False)
    assert of_run("q1", "q1", True)
    assert not of_run("q1#abc", "q1", True)  # a saved thread's run is its question's id


def test_a_step_of_another_run_is_not_the_conversations() -> None:
    messages = [HumanMessage("first", id="h1"), AIMessage("done"), HumanMessage("next", id="h2")]
    assert question_at(messages) == 2
    assert run_of(messages, "h2", True)
    assert not run_of(messages, "h1", True)
    assert question_at([AIMessage("no question")]) is None
    with pytest.raises(ValueError, match="a run needs a goal"):
        opening([AIMessage("no question")], None, None, thread="chat", saved=True)


@pytest.mark.parametrize("finished", [True, False], ids=["returned", "cut-off"])
def test_a_call_approved_and_run_is_never_said_not_to_have_run_from_its_question(
    finished: bool,
) -> None:
    """A rollback (``multitask_strategy="rollback"``) leaves the thread at the approval
    question although the approved call ran: the step there has no keys yet. Before: the next
    message answered it "not run (tool_rejected:pay): a new message came instead", and the
    record ended the run ``tool_rejected``. Now the record is asked by the call's id too: what
    it returned, or of unknown outcome; never run again."""
    payments = Payments(holds=not finished)
    started, release = payments.started, payments.release
    model = ScriptedChatModel(replies=[call("pay", order="a"), "Paid.", "Hello."])
    policy = Policy(require_approval={"pay"})
    graph = build_graph(model, [payments.tool], policy=policy, checkpointer=InMemorySaver())

    async def main() -> dict[str, Any]:
        await graph.ainvoke({"messages": [HumanMessage("Pay a.")]}, CONFIG)
        question = (await graph.aget_state(CONFIG)).config  # where a rollback leaves it
        answered = asyncio.create_task(graph.ainvoke(Command(resume={"approved": True}), CONFIG))
        assert await asyncio.to_thread(started.wait, PATIENCE)
        if not finished:
            answered.cancel()  # the server cancels the run that answered
        with contextlib.suppress(asyncio.CancelledError):
            await answered
        release.set()
        return dict(await graph.ainvoke({"messages": [HumanMessage("Say hello.")]}, question))

    out = asyncio.run(main())
    assert payments.made == ["a"]
    answer = next(m for m in out["messages"] if getattr(m, "tool_call_id", None))
    if finished:
        assert (answer.text, ran(answer)) == ("paid a", True)
    else:
        assert answer.text.startswith("outcome unknown (tool_outcome_unknown:pay)")
    assert "not run" not in answer.text
    records = ledger_for(saver_of(graph)).book("chat", str(out["messages"][0].id)).records
    ends = [r.body["reason"] for r in records if r.kind is Kind.ENDED]
    assert "tool_rejected" not in ends
