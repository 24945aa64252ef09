"""A message typed while a question waits is never lost: the waiting calls are traced as not
run, the conversation says why the run ended, and the new message starts a new run with fresh
budgets (with ``{"messages": [...]}`` or ``{"goal": ...}``, sync and async). Without the fix
the model was shown the old goal, the call vanished and the budgets carried over."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Policy, build_graph
from gated_react._engine.call_keys import loop_key
from gated_react._engine.turns import opening, own_end
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import deps, state
from ..support.reaping import PATIENCE

CONTEXT = deps().context

CONFIG: Any = {"configurable": {"thread_id": "chat"}}
BILLING = call("get_user_billing", user_id=42)
REJECTED = (
    "I stopped before finishing (tool_rejected:get_user_billing): get_user_billing waited for "
    "approval and did not run: a new message came instead."
)


NOT_RUN = "a new message came instead"


def _graph(model: ScriptedChatModel) -> Any:
    policy = Policy(require_approval=["get_user_billing"]).replace(max_steps=1)
    return build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=InMemorySaver())


def _goal_shown(model: ScriptedChatModel) -> str:
    """The goal in the last request (after the conversation, before the last-step note)."""
    return str(model.requests[-1][-1].content).split("\n\n")[0]


def _check(out: dict[str, Any], graph: Any, old: str, new: str) -> None:
    assert (out["stop_reason"], out["answer"]) == ("success", "Hello.")
    assert out["usage"]["steps"] == 1  # fresh budgets: with the old run's, max_steps 1 stops it
    (entry,) = out["trace"]
    assert entry["tool"] == "get_user_billing"
    assert (entry["ok"], entry["stop_reason"]) == (False, "tool_rejected:get_user_billing")
    assert [(m.type, m.text) for m in out["messages"]] == [
        ("human", old),
        ("ai", ""),  # the call that waited, answered: every tool call id is
        ("tool", f"not run (tool_rejected:get_user_billing): {NOT_RUN}"),
        ("ai", REJECTED),
        ("human", new),
        ("ai", "Hello."),
    ]
    waited, answer = out["messages"][1:3]
    assert [c["id"] for c in waited.tool_calls] == [answer.tool_call_id]
    assert answer.status == "error"
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
    out = graph.invoke(said("Never mind, say hello."), CONFIG)
    assert _goal_shown(model) == "Never mind, say hello."
    assert REJECTED in [m.text for m in model.requests[-1] if m.type == "ai"]
    _check(out, graph, "Bill user 42.", "Never mind, say hello.")


def test_the_same_goal_again_while_a_question_waits_ends_the_step_not_the_budgets() -> None:
    """Nothing new came: the waiting call is answered as not run and the run goes on under
    the budgets it had (max_steps 1, spent by the first decision), checked before the model
    is asked again. With fresh budgets, a state that merely looked like a waiting step (an
    edit of history_from or action) bought a model call and a tool call at every edit."""
    model = ScriptedChatModel(replies=[BILLING, "Hello."])
    graph = _graph(model)
    graph.invoke({"goal": "Bill user 42."}, CONFIG)
    out = graph.invoke({"goal": "Bill user 42."}, CONFIG)
    assert out["stop_reason"] == "max_steps"
    assert len(model.requests) == 1
    assert out["usage"]["steps"] == 1
    waited, answer = out["messages"][1:3]
    assert [c["id"] for c in waited.tool_calls] == [answer.tool_call_id]
    assert answer.text == f"not run (tool_rejected:get_user_billing): {NOT_RUN}"


def test_async_runs_the_same_way() -> None:
    model = ScriptedChatModel(replies=[BILLING, "Hello."])
    graph = _graph(model)

    async def main() -> dict[str, Any]:
        await graph.ainvoke({"messages": [HumanMessage("Bill user 42.")]}, CONFIG)
        return dict(await graph.ainvoke({"messages": [HumanMessage("Say hello.")]}, CONFIG))

    _check(asyncio.run(main()), graph, "Bill user 42.", "Say hello.")


def test_calls_the_gate_let_through_are_of_unknown_outcome() -> None:
    """A question after a crash in execute (or the crash itself): the call may have run."""
    human = HumanMessage("Bill user 42.", id="h1")
    billing = {"name": "get_user_billing", "args": {"user_id": 42}, "id": "c1"}
    proposed = AIMessage("", tool_calls=[billing], id="a1")
    waiting = state(
        goal="Bill user 42.",
        turn="h1",
        messages=[human, proposed, HumanMessage("Stop.", id="h2")],
        usage={"steps": 1, "tool_calls": 1},
        action={"kind": "tool", "name": "get_user_billing", "args": {"user_id": 42}, "id": "c1"},
        seen=[loop_key("get_user_billing", {"user_id": 42})],
        calls=[
            {"step": 1, "tool": "get_user_billing", "args": {"user_id": 42}, "key": "k", "id": "c1"}
        ],
    )
    opened, update, _ = opening(waiting, CONTEXT)
    assert (opened.goal, opened.usage.steps, opened.calls) == ("Stop.", 0, [])
    assert update["trace"][0]["stop_reason"] == "tool_outcome_unknown:get_user_billing"
    answer, note = update["messages"].value[2:4]
    assert (answer.tool_call_id, answer.status) == ("c1", "error")
    assert answer.text == (
        "outcome unknown (tool_outcome_unknown:get_user_billing): get_user_billing may have "
        f"run, but the run ended before its result was recorded; {NOT_RUN}. Find out whether "
        "it did before calling it again."
    )
    assert note.text == (
        "I stopped before finishing (tool_outcome_unknown:get_user_billing): get_user_billing "
        f"may have run, but the run ended before its result was recorded; {NOT_RUN}."
    )
    assert [m.type for m in opened.messages] == ["human", "ai", "tool", "ai", "human"]


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
    assert out["trace"][0]["stop_reason"] == "tool_outcome_unknown:send_email"
    result, note = out["messages"][2:4]
    assert (result.type, result.status) == ("tool", "error")
    assert result.text.startswith("outcome unknown (tool_outcome_unknown:send_email)")
    assert "may have run" in result.text
    assert "may have run" in note.text
    shown = [m.text for m in model.requests[-1]]  # the model's next prompt says the same
    assert result.text in shown
    assert note.text in shown
    assert not any("not run" in text for text in [*shown, *(m.text for m in out["messages"])])


def test_a_continuing_run_is_left_alone() -> None:
    """After observe the step is in the history: the next decision continues the run."""
    human = HumanMessage("Bill user 42.", id="h1")
    history = [{"step": 1, "action": {"name": "get_user_billing"}, "observation": "ok"}]
    going = state(
        goal="Bill user 42.",
        turn="h1",
        messages=[human],
        usage={"steps": 1, "tool_calls": 1},
        action={"kind": "tool", "name": "get_user_billing", "args": {}},
        history=history,
    )
    assert opening(going, CONTEXT) == (going, {}, False)


@pytest.mark.parametrize(
    ("kinds", "end"),
    [("", 1), ("at", 3), ("atat", 5), ("ath", 3), ("athat", 3), ("h", 1), ("aht", 2)],
)
def test_the_runs_own_messages_end_at_the_first_that_came_from_outside(
    kinds: str, end: int
) -> None:
    made = {"a": lambda: AIMessage("x"), "t": lambda: ToolMessage("r", tool_call_id="c")}
    made["h"] = lambda: HumanMessage("new")
    messages = [HumanMessage("goal"), *(made[k]() for k in kinds)]
    assert own_end(messages, 0) == end
