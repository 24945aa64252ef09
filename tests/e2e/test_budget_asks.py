"""Budgets that ask, end to end with a checkpointer: a run paused by each budget kind and
answered with each decision through ``resume`` (approve extends by the proposal, edit sets the
limit, reject stops with the budget's own reason); without a checkpointer it stops as before."""

from __future__ import annotations

import time
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Policy, Price, build_graph, read, resume, run
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.results import extensions


@tool
def slow_lookup(user_id: int) -> str:
    """Look a user up, slowly."""
    time.sleep(1.05)
    return f"user {user_id}: Anna"


PROFILE, BILLING = call("get_user_profile", user_id=42), call("get_user_billing", user_id=42)
PRICED = {"prices": {"scripted": Price(input=1000, output=1000)}}  # 0.001 USD a token
# kind: policy fields, the script, a limit a human may set instead of the proposal
KINDS: dict[str, tuple[dict[str, Any], list[Any], float]] = {
    "max_steps": ({"max_steps": 1}, [PROFILE, "done"], 3),
    "max_tool_calls": ({"max_tool_calls": 1}, [PROFILE, BILLING, "done"], 5),
    "tool_limit:get_user_profile": (
        {"tool_limits": {"get_user_profile": 1}},
        [PROFILE, call("get_user_profile", user_id=7), "done"],
        4,
    ),
    "max_seconds": ({"max_seconds": 1}, [call("slow_lookup", user_id=42), "done"], 60),
    "max_tokens": ({"max_tokens": 20}, [PROFILE, "done"], 100_000),
    "max_cost": ({"max_cost": 0.01, **PRICED}, [PROFILE, "done"], 100.0),
}
ANSWERS = {
    "approve": lambda kind, limit: {"decisions": [{"type": "approve"}]},
    "edit": lambda kind, limit: {
        "decisions": [{"type": "edit", "edited_action": {"name": kind, "args": {"limit": limit}}}]
    },
    "reject": lambda kind, limit: {"decisions": [{"type": "reject", "message": "enough"}]},
}


def _graph(kind: str, saver: InMemorySaver | None) -> Any:
    fields, script, _ = KINDS[kind]
    policy = Policy().replace(on_budget="ask", **fields)
    model = ScriptedChatModel(replies=script)
    return build_graph(model, [*SUPPORT_TOOLS, slow_lookup], policy=policy, checkpointer=saver)


@pytest.mark.parametrize("decision", list(ANSWERS))
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_spent_budget_asks_and_each_decision_is_taken(kind: str, decision: str) -> None:
    graph = _graph(kind, InMemorySaver())
    paused = run(graph, "Who is user 42?", thread_id="t")
    assert paused["status"] == "paused", paused["message"]
    [question] = paused["pending"]
    request = question["action_requests"][0]
    assert (question["kind"], request["name"], request["args"]["budget"]) == ("budget", kind, kind)
    limit = KINDS[kind][2]
    out = resume(graph, "t", ANSWERS[decision](kind, limit))
    if decision == "reject":
        assert out["stop_reason"] == kind
        assert out["message"].endswith("; a human declined: enough")
        return
    assert out["stop_reason"] == "success", out["message"]
    [extended] = [entry for entry in out["trace"] if entry.get("extended")]
    assert extended["tool"] == kind
    granted = limit if decision == "edit" else request["args"]["proposed"]
    assert extended["extended"].endswith(f" -> {granted:g} ({decision})")
    assert [e.limit for e in extensions(graph, "t")] == [granted]  # in the run's record


@pytest.mark.parametrize("kind", list(KINDS))
def test_without_a_checkpointer_the_budget_stops_as_before(kind: str) -> None:
    out = _graph(kind, None).invoke({"goal": "Who is user 42?"})
    assert out["stop_reason"] == kind


def test_an_extension_counts_for_its_own_run_only() -> None:
    """The next run on the thread starts from the policy's limits again."""
    script = [PROFILE, "done", call("get_user_profile", user_id=7), "done"]
    policy = Policy().replace(on_budget="ask", max_steps=1)
    graph = build_graph(
        ScriptedChatModel(replies=script),
        SUPPORT_TOOLS,
        policy=policy,
        checkpointer=InMemorySaver(),
    )
    run(graph, "Who is user 42?", thread_id="t")
    assert resume(graph, "t", {"approved": True})["status"] == "ok"
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"goal": "And user 7?"}, config)  # a new run on the thread
    again = read(graph, "t")
    assert again["status"] == "paused"
    assert again["pending"][0]["args"]["limit"] == 1
    assert extensions(graph, "t") == []


def test_the_async_twins_ask_and_take_the_answer_too() -> None:
    """``arun`` / ``aresume`` (what the workers call): the same pause and the same extension."""
    import asyncio

    from gated_react import aresume, arun

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        graph = _graph("max_tool_calls", InMemorySaver())
        paused = await arun(graph, "Who is user 42?", thread_id="t")
        done = await aresume(graph, "t", {"approved": True, "args": {"limit": 3}})
        return dict(paused), dict(done)

    paused, done = asyncio.run(scenario())
    assert paused["pending"][0]["tool"] == "max_tool_calls"
    assert done["stop_reason"] == "success"
    assert [e.get("extended") for e in done["trace"] if e.get("extended")] == [
        "max_tool_calls 1 -> 3 (edit)"
    ]


def test_an_edited_limit_beside_keys_it_does_not_take_asks_again() -> None:
    """Before: ``--args '{"limit": 3, "x": 1}'`` was taken, "x" silently dropped."""
    graph = _graph("max_steps", InMemorySaver())
    run(graph, "Who is user 42?", thread_id="t")
    edited = {"name": "max_steps", "args": {"limit": 3, "x": 1}}
    out = resume(graph, "t", {"decisions": [{"type": "edit", "edited_action": edited}]})
    [again] = out["pending"]
    assert again["error"].endswith("refused: args takes only limit, the new limit; not 'x'")
    assert extensions(graph, "t") == []
