"""Chat messages in and out: ``{"messages": [...]}`` starts a run like ``{"goal": ...}``; the result
has the conversation as a chat client shows it; a follow-up message on the same thread is a new
run with fresh budgets that sees the earlier conversation; and an app written for
``create_agent`` works unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import SecretStr

from gated_react import Policy, build_graph
from gated_react.stops import said
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.openai_server import FakeOpenAI, Reply, reply
from ..support.results import answered_once, invoked

CONFIG: Any = {"configurable": {"thread_id": "chat"}}
PROFILE = call("get_user_profile", user_id=42)
BILLING = call("get_user_billing", user_id=42)


def _graph(model: ScriptedChatModel, **policy: Any) -> Any:
    return build_graph(
        model, SUPPORT_TOOLS, policy=Policy().replace(**policy), checkpointer=InMemorySaver()
    )


def _shape(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.type, m.text) for m in messages]


def _turns(request: list[Any]) -> list[Any]:
    """A model request after its system message, if it has one (the rules and the app's
    prompt): the conversation the model is shown."""
    return request[1:] if request and request[0].type == "system" else request


def test_the_last_human_message_is_the_goal_and_earlier_ones_are_shown_once() -> None:
    model = ScriptedChatModel(replies=[PROFILE, "Anna is on the pro plan."])
    earlier = [HumanMessage("Hi, I am the support lead."), AIMessage("Hello! How can I help?")]
    asked = {"messages": [*earlier, HumanMessage("Which plan is user 42 on?")]}
    out = invoked(_graph(model), asked, CONFIG)
    assert out["stop_reason"] == "success"
    first, second = model.requests
    assert _shape(_turns(first)) == [
        ("human", "Hi, I am the support lead."),
        ("ai", "Hello! How can I help?"),
        ("human", "Which plan is user 42 on?"),
    ]
    assert second[: len(first)] == first  # shown once, at the start: the prefix stays put
    assert _shape(out["messages"]) == [
        ("human", "Hi, I am the support lead."),
        ("ai", "Hello! How can I help?"),
        ("human", "Which plan is user 42 on?"),
        ("ai", ""),
        ("tool", json.dumps(out["history"][0]["observation"], ensure_ascii=False)),
        ("ai", "Anna is on the pro plan."),
    ]


def test_messages_hold_every_call_and_its_result_as_create_agent_stores_them() -> None:
    """Before: only the goal and the answer; a chat UI drew no tool card."""
    said = AIMessage("Let me look.", tool_calls=[{**PROFILE.tool_calls[0], "id": "call_42"}])
    model = ScriptedChatModel(replies=[said, BILLING, "Anna is on the pro plan."])
    out = invoked(_graph(model), {"goal": "Which plan is user 42 on?"}, CONFIG)
    _human, first, result, second, billed, answer = out["messages"]
    assert (first.text, first.tool_calls[0]["id"], first.tool_calls[0]["name"]) == (
        "Let me look.",  # what the model wrote with its call is kept
        "call_42",  # under the model's own id
        "get_user_profile",
    )
    assert (result.tool_call_id, result.status, result.name) == (
        "call_42",
        "success",
        "get_user_profile",
    )
    assert second.tool_calls[0]["id"] == billed.tool_call_id
    assert answer.text == "Anna is on the pro plan."
    assert answered_once(out["messages"])
    assert [h["action"]["id"] for h in out["history"]] == ["call_42", billed.tool_call_id]


SAID_FIRST = {
    "tool_denied:get_user_billing": "I'm not allowed to use get_user_billing, so I stopped there.",
    "max_tool_calls": "I reached the number of tool calls I may make before I could finish.",
    "loop_detected": "I was about to repeat a step I had already taken, so I stopped.",
}


@pytest.mark.parametrize(
    ("policy", "replies", "reason"),
    [
        ({"allow": ["get_user_profile"]}, [BILLING], "tool_denied:get_user_billing"),
        ({"max_tool_calls": 1}, [PROFILE, BILLING], "max_tool_calls"),
        ({}, [PROFILE, PROFILE], "loop_detected"),
    ],
)
def test_a_call_that_did_not_run_is_answered_with_an_error_that_says_why(
    policy: dict[str, Any], replies: list[Any], reason: str
) -> None:
    model = ScriptedChatModel(replies=replies)
    out = _graph(model, **policy).invoke({"goal": "Who is user 42?"}, CONFIG)
    assert out["stop_reason"] == reason
    assert answered_once(out["messages"])
    refused = out["messages"][-2]
    assert (refused.type, refused.status) == ("tool", "error")
    assert reason in refused.text
    assert out["messages"][-1].text == said(reason, out["message"])  # the agent, talking
    assert out["messages"][-1].text.startswith(SAID_FIRST[reason])


def test_parallel_calls_stopped_at_one_answer_them_all() -> None:
    both = AIMessage("", tool_calls=[*PROFILE.tool_calls, *BILLING.tool_calls])
    graph = _graph(ScriptedChatModel(replies=[both]), max_parallel_calls=2, max_tool_calls=1)
    out = graph.invoke({"goal": "Who is user 42?"}, CONFIG)
    assert out["stop_reason"] == "max_tool_calls"
    assert answered_once(out["messages"])
    assert [m.status for m in out["messages"] if m.type == "tool"] == ["error", "error"]


def test_a_rejected_call_is_answered_and_a_waiting_call_is_the_last_message_in_any_turn() -> None:
    """Before: in a follow-up turn the last message was the human's, so a chat UI drew no
    approval panel (it draws one under the last AI message)."""
    model = ScriptedChatModel(replies=[PROFILE, "Anna.", BILLING])
    graph = _graph(model, require_approval=["get_user_billing"])
    graph.invoke({"messages": [HumanMessage("Who is user 42?")]}, CONFIG)
    asked = graph.invoke({"messages": [HumanMessage("Bill her.")]}, CONFIG)
    assert asked["__interrupt__"]
    last = graph.get_state(CONFIG).values["messages"][-1]
    assert (last.type, last.tool_calls[0]["name"]) == ("ai", "get_user_billing")
    out = graph.invoke(Command(resume={"decisions": [{"type": "reject", "message": "no"}]}), CONFIG)
    assert out["stop_reason"] == "tool_rejected:get_user_billing"
    rejected = out["messages"][-2]
    assert (rejected.status, rejected.tool_call_id) == ("error", last.tool_calls[0]["id"])
    assert "a human rejected get_user_billing: no" in rejected.text
    assert answered_once(out["messages"])


def test_a_stopped_run_says_why_in_the_conversation() -> None:
    model = ScriptedChatModel(replies=[PROFILE, PROFILE])
    out = _graph(model).invoke({"goal": "Who is user 42?"}, CONFIG)
    assert out["stop_reason"] == "loop_detected"
    human, ai = out["messages"][0], out["messages"][-1]
    assert (human.type, human.text) == ("human", "Who is user 42?")
    assert ai.type == "ai"
    assert ai.text == said("loop_detected", out["message"])
    assert ai.text.startswith("I was about to repeat a step I had already taken, so I stopped.")


def test_a_follow_up_is_a_new_run_with_fresh_budgets_that_sees_the_conversation() -> None:
    """Before: earlier turns reached the model as plain text, without their tool calls; a
    question about an earlier result was answered without it."""
    model = ScriptedChatModel(replies=[PROFILE, "Anna.", PROFILE, "Anna is on the pro plan."])
    graph = _graph(model, max_steps=2)
    first = invoked(graph, {"messages": [HumanMessage("Who is user 42?")]}, CONFIG)
    assert (first["stop_reason"], first["usage"]["steps"]) == ("success", 2)
    second = invoked(graph, {"messages": [HumanMessage("Which plan is she on?")]}, CONFIG)
    assert second["stop_reason"] == "success"  # with the first run's budget it would stop
    assert second["usage"]["steps"] == 2
    assert len(second["history"]) == 2  # the thread keeps both runs' steps
    last_of_turn_1, asked = model.requests[1], model.requests[2]
    assert [m.type for m in _turns(asked)] == ["human", "ai", "tool", "ai", "human"]
    assert _turns(asked)[1].tool_calls[0]["id"] == first["messages"][1].tool_calls[0]["id"]
    assert "pro" in _turns(asked)[2].text  # the earlier result, as the model saw it
    # the prefix a cache holds: all of turn 1's last request but its last-step note
    assert last_of_turn_1[-1].text.startswith("This is your last step")
    assert asked[: len(last_of_turn_1) - 1] == last_of_turn_1[:-1]
    assert asked[-1].text.startswith("Which plan is she on?")
    assert second["messages"][-1].text == "Anna is on the pro plan."


def test_earlier_turns_fold_inside_the_steps_budget() -> None:
    model = ScriptedChatModel(replies=[PROFILE, BILLING, "Anna.", "Yes."])
    graph = _graph(model, context_steps=1)
    graph.invoke({"messages": [HumanMessage("Who is user 42?")]}, CONFIG)
    graph.invoke({"messages": [HumanMessage("And then?")]}, CONFIG)
    asked = _turns(model.requests[-1])
    assert [m.type for m in asked] == ["human", "ai", "tool", "ai", "human"]
    assert asked[1].tool_calls[0]["name"] == "get_user_billing"  # the oldest step folded away


def test_a_follow_up_goal_works_too_and_loops_are_per_run() -> None:
    model = ScriptedChatModel(replies=[PROFILE, "Anna.", PROFILE, "Still Anna."])
    graph = _graph(model)
    graph.invoke({"goal": "Who is user 42?"}, CONFIG)
    again = graph.invoke({"goal": "Check user 42 again."}, CONFIG)
    assert again["stop_reason"] == "success"  # the same call in a new run is not a loop
    assert [m.text for m in again["messages"] if m.type != "tool"] == [
        "Who is user 42?",
        "",
        "Anna.",
        "Check user 42 again.",
        "",
        "Still Anna.",
    ]
    assert answered_once(again["messages"])


def test_an_app_written_for_create_agent_works_unchanged() -> None:
    """The calls such an app makes: invoke with messages, read the last message's content."""
    model = ScriptedChatModel(replies=[PROFILE, "Anna is on the pro plan."])
    agent = build_graph(model, SUPPORT_TOOLS)
    result = agent.invoke({"messages": [{"role": "user", "content": "Which plan is user 42 on?"}]})
    assert result["messages"][-1].content == "Anna is on the pro plan."
    assert isinstance(result["messages"][-1], AIMessage)


EDIT_SCRIPTS = {
    "tools": [BILLING, "Done.", "Hi."],
    "json": [
        '{"kind": "tool", "name": "get_user_billing", "args": {"user_id": 42}}',
        '{"kind": "final", "answer": "Done."}',
        '{"kind": "final", "answer": "Hi."}',
    ],
    "text": [
        'Thought: bill\nAction: get_user_billing\nAction Input: {"user_id": 42}',
        "Thought: done\nFinal Answer: Done.",
        "Thought: hi\nFinal Answer: Hi.",
    ],
}


@pytest.mark.parametrize("protocol", ["tools", "json", "text"])
def test_a_call_a_human_edited_is_replayed_in_later_turns_as_the_run_showed_it(
    protocol: str,
) -> None:
    """Before: the model saw the edited call in its run (user 7) and its own (user 42) in the
    next turn, which broke the cached prefix; the stored result said user 7 under a call to
    user 42, and nothing said a human had changed it."""
    model = ScriptedChatModel(replies=EDIT_SCRIPTS[protocol])
    graph = _graph(model, require_approval=["get_user_billing"], protocol=protocol)
    graph.invoke({"messages": [HumanMessage("Bill user 42.")]}, CONFIG)
    edit = {"type": "edit", "edited_action": {"name": "get_user_billing", "args": {"user_id": 7}}}
    graph.invoke(Command(resume={"decisions": [edit]}), CONFIG)
    out = invoked(graph, {"messages": [HumanMessage("Thanks.")]}, CONFIG)
    proposed, result = out["messages"][1:3]
    assert proposed.tool_calls[0]["args"] == {"user_id": 42}  # the model's call, as it made it
    assert result.text.startswith("Note: a human reviewer replaced this call before it ran")
    assert '{"user_id": 7}' in result.text
    in_run, next_turn = model.requests[1], model.requests[2]
    assert next_turn[: len(in_run)] == in_run  # the next turn replays what the run showed
    assert result.text in in_run[-1].text  # the model was shown the note in its run
    assert answered_once(out["messages"])
    assert out["history"][0]["action"]["args"] == {"user_id": 7}  # what ran


def _stored_ai(graph: Any, streamed: bool) -> list[Any]:
    """The AI messages a thread keeps after one question, asked as a chat UI or an app asks."""
    asked = {"messages": [HumanMessage("Which plan is user 42 on?")]}
    if streamed:
        for _ in graph.stream(asked, CONFIG, stream_mode=["messages", "values"]):
            pass
    else:
        graph.invoke(asked, CONFIG)
    return [m for m in graph.get_state(CONFIG).values["messages"] if m.type == "ai"]


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_stored_ai_messages_keep_usage_and_metadata_as_create_agents_do(streamed: bool) -> None:
    """The real ChatOpenAI against a chat-completions server, on both constructors. Before, the
    gated graph's AI messages had no ``usage_metadata`` and an empty ``response_metadata``."""
    script = [
        Reply(content="Let me look.", tool_calls=[("get_user_profile", {"user_id": 42})]),
        reply("Anna is on the pro plan."),
    ]
    kept: dict[str, list[Any]] = {}
    for name, make in (("create_agent", create_agent), ("gated", build_graph)):
        with FakeOpenAI(script) as server:
            model = ChatOpenAI(
                base_url=server.base_url,
                api_key=SecretStr("k"),
                model="gpt-4.1-mini",
                stream_usage=True,
            )
            graph = make(model, SUPPORT_TOOLS, checkpointer=InMemorySaver())
            kept[name] = [
                (m.usage_metadata, {k: v for k, v in m.response_metadata.items() if k != "id"})
                for m in _stored_ai(graph, streamed)
            ]
    assert kept["gated"] == kept["create_agent"]
    (_, first), (usage, last) = kept["gated"]
    assert (first["finish_reason"], last["finish_reason"]) == ("tool_calls", "stop")
    assert last["model_name"] == "gpt-4.1-mini"
    assert usage == {**usage, "input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
