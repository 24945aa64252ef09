"""Chat messages in and out: ``{"messages": [...]}`` starts a run like ``{"goal": ...}``; the result
has the conversation as a chat client shows it; a follow-up message on the same thread is a new
run with fresh budgets that sees the earlier conversation; and an app written for
``create_agent`` works unchanged."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Policy, build_graph
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

CONFIG: Any = {"configurable": {"thread_id": "chat"}}
PROFILE = call("get_user_profile", user_id=42)


def _graph(model: ScriptedChatModel, **policy: Any) -> Any:
    return build_graph(
        model, SUPPORT_TOOLS, policy=Policy().replace(**policy), checkpointer=InMemorySaver()
    )


def test_the_last_human_message_is_the_goal_and_earlier_ones_are_shown_once() -> None:
    model = ScriptedChatModel(replies=[PROFILE, "Anna is on the pro plan."])
    earlier = [HumanMessage("Hi, I am the support lead."), AIMessage("Hello! How can I help?")]
    out = _graph(model).invoke(
        {"messages": [*earlier, HumanMessage("Which plan is user 42 on?")]}, CONFIG
    )
    assert out["stop_reason"] == "success"
    first, second = model.requests
    assert first[1].content == (
        "Earlier in this conversation:\n"
        "User: Hi, I am the support lead.\n"
        "Assistant: Hello! How can I help?\n\n"
        "Which plan is user 42 on?"
    )
    assert second[: len(first)] == first  # shown once, at the start: the prefix stays put
    assert [(m.type, m.text) for m in out["messages"]] == [
        ("human", "Hi, I am the support lead."),
        ("ai", "Hello! How can I help?"),
        ("human", "Which plan is user 42 on?"),
        ("ai", "Anna is on the pro plan."),
    ]


def test_a_stopped_run_says_why_in_the_conversation() -> None:
    model = ScriptedChatModel(replies=[PROFILE, PROFILE])
    out = _graph(model).invoke({"goal": "Who is user 42?"}, CONFIG)
    assert out["stop_reason"] == "loop_detected"
    human, ai = out["messages"]
    assert (human.type, human.text) == ("human", "Who is user 42?")
    assert ai.type == "ai"
    assert ai.text.startswith("I stopped before finishing (loop_detected)")


def test_a_follow_up_is_a_new_run_with_fresh_budgets_that_sees_the_conversation() -> None:
    model = ScriptedChatModel(replies=[PROFILE, "Anna.", PROFILE, "Anna is on the pro plan."])
    graph = _graph(model, max_steps=2)
    first = graph.invoke({"messages": [HumanMessage("Who is user 42?")]}, CONFIG)
    assert (first["stop_reason"], first["usage"]["steps"]) == ("success", 2)
    second = graph.invoke({"messages": [HumanMessage("Which plan is she on?")]}, CONFIG)
    assert second["stop_reason"] == "success"  # with the first run's budget it would stop
    assert second["usage"]["steps"] == 2
    assert len(second["history"]) == 2  # the thread keeps both runs' steps
    asked = model.requests[2]
    assert asked[1].content == (
        "Earlier in this conversation:\nUser: Who is user 42?\nAssistant: Anna.\n\n"
        "Which plan is she on?"
    )
    assert [m.type for m in asked] == ["system", "human"]  # the first run's steps are not replayed
    assert [m.text for m in second["messages"]][-2:] == [
        "Which plan is she on?",
        "Anna is on the pro plan.",
    ]


def test_a_follow_up_goal_works_too_and_loops_are_per_run() -> None:
    model = ScriptedChatModel(replies=[PROFILE, "Anna.", PROFILE, "Still Anna."])
    graph = _graph(model)
    graph.invoke({"goal": "Who is user 42?"}, CONFIG)
    again = graph.invoke({"goal": "Check user 42 again."}, CONFIG)
    assert again["stop_reason"] == "success"  # the same call in a new run is not a loop
    assert [m.text for m in again["messages"]] == [
        "Who is user 42?",
        "Anna.",
        "Check user 42 again.",
        "Still Anna.",
    ]


def test_an_app_written_for_create_agent_works_unchanged() -> None:
    """The calls such an app makes: invoke with messages, read the last message's content."""
    model = ScriptedChatModel(replies=[PROFILE, "Anna is on the pro plan."])
    agent = build_graph(model, SUPPORT_TOOLS)
    result = agent.invoke({"messages": [{"role": "user", "content": "Which plan is user 42 on?"}]})
    assert result["messages"][-1].content == "Anna is on the pro plan."
    assert isinstance(result["messages"][-1], AIMessage)
