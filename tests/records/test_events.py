"""The decision an event shows after a routed node is the branch ``gated_react.routing`` takes on
the step in hand after that node: the CLI never decides again what the graph already decided.
The counters an event carries are the run's record's, never an update's."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, get_args

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Interrupt

from gated_react import Policy, build_graph, resume, routing, run
from gated_react.records import events
from gated_react.records.events import Tracker
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

CALL = {"id": "c1", "tool": "get_user_billing", "args": {"user_id": 42}, "key": "k"}
REFUSAL = {"text": "I may not refund.", "error": "tool_denied:refund"}
ENDING = {"reason": "loop_detected", "message": "again", "call": "c1"}

# node, its router, the router's branch type, the words the CLI shows for its branches
ROUTED: list[tuple[str, Callable[..., str], Any, dict[Any, str]]] = [
    ("decide", routing.after_decide, routing.AfterDecide, events.DECIDE_WORDS),
    ("validate", routing.after_validate, routing.AfterValidate, events.VALIDATE_WORDS),
    ("gate", routing.after_gate, routing.AfterGate, events.GATE_WORDS),
    ("observe", routing.after_observe, routing.AfterObserve, events.OBSERVE_WORDS),
]


def _step(**held: Any) -> dict[str, Any]:
    """An update that writes the step in hand, as the nodes write it (plain JSON)."""
    return {"step": {"run": "q", **held}}


REPLY = {"text": "", "tool_calls": [{"name": "x", "args": {}, "id": "c1"}]}
# what the nodes before wrote, the node, its update, the decision the view and run log show
UPDATES: list[tuple[list[tuple[str, Any]], str, dict[str, Any], str]] = [
    ([], "decide", _step(reply=REPLY), "proposed"),
    ([], "decide", _step(ending={"reason": "llm_timeout", "message": "slow"}), "failed"),
    ([], "validate", _step(reply=REPLY, calls=[CALL]), "tool"),
    ([], "validate", _step(answer={"text": "42"}), "final"),
    ([], "validate", _step(retry={"why": "bad_json", "message": "m", "count": 1}), "retry"),
    ([], "validate", _step(ending={"reason": "invalid_action:x", "message": "m"}), "invalid"),
    ([], "gate", _step(calls=[CALL]), "allowed"),
    ([], "gate", _step(calls=[{**CALL, "shown": REFUSAL}]), "allowed"),  # execute answers it
    ([], "gate", _step(calls=[CALL], ending=ENDING), "stopped"),
    ([("execute", _step(calls=[{**CALL, "outcome": {"ok": True}}]))], "observe", {}, "next"),
    ([("execute", _step(calls=[CALL], ending=ENDING))], "observe", {}, "stopped"),
    ([], "observe", _step(calls=[CALL], answer={"text": "a", "direct": True}), "answered"),
]


@pytest.mark.parametrize(("node", "router", "branches", "words"), ROUTED)
def test_every_branch_of_every_router_has_a_word(
    node: str, router: Callable[..., str], branches: Any, words: dict[Any, str]
) -> None:
    assert set(words) == set(get_args(branches))


def _tracked(before: list[tuple[str, Any]]) -> Tracker:
    tracker = Tracker("t")
    for node, update in before:
        tracker.event(node, update)
    return tracker


@pytest.mark.parametrize(("before", "node", "update", "decision"), UPDATES)
def test_the_decision_is_the_routers_branch(
    before: list[tuple[str, Any]], node: str, update: dict[str, Any], decision: str
) -> None:
    """Observe writes nothing as a rule: its branch is the router's on the step the nodes
    before it left."""
    router, words = next((r, w) for n, r, _, w in ROUTED if n == node)
    tracker = _tracked(before)
    assert tracker.event(node, update).decision == decision
    assert decision == words[router({"step": tracker.held})]


@pytest.mark.parametrize(("node", "router", "branches", "words"), ROUTED)
def test_events_ask_the_router(
    node: str,
    router: Callable[..., str],
    branches: Any,
    words: dict[Any, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever branch the router names is what the event shows, on the step as stored; the
    node a question then comes from is where that branch leads."""
    before, _, update, _ = next(u for u in UPDATES if u[1] == node)
    for branch in get_args(branches):
        seen: list[dict[str, Any]] = []
        monkeypatch.setattr(routing, router.__name__, _answering(branch, seen))
        tracker = _tracked(before)
        assert tracker.event(node, update).decision == words[branch]
        assert seen[-1] == {"step": tracker.held}
        paths = {"decide": routing.AFTER_DECIDE, "validate": routing.AFTER_VALIDATE,
                 "gate": routing.AFTER_GATE, "observe": routing.AFTER_OBSERVE}  # fmt: skip
        assert tracker.next_node == paths[node][branch]


def _answering(branch: str, seen: list[dict[str, Any]]) -> Callable[[dict[str, Any]], str]:
    """A stand-in router that records what it was given and names ``branch``."""

    def router(state: dict[str, Any]) -> str:
        seen.append(state)
        return branch

    return router


def test_a_refusal_shown_to_the_model_shows_the_tool_and_its_reason() -> None:
    event = Tracker("t").event("gate", _step(calls=[{**CALL, "shown": REFUSAL}]))
    assert event.action == {"tool": "get_user_billing", "args": {"user_id": 42}}
    assert event.observation == "tool_denied:refund"
    answered = {"text": "billing says USD 49", "by_human": True}
    event = Tracker("t").event("gate", _step(calls=[{**CALL, "shown": answered}]))
    assert event.observation == "billing says USD 49"


def test_a_key_is_masked_before_the_text_is_clipped() -> None:
    key = "k" * 20 + "SECRETSECRET"
    text = "x" * 100 + key  # the clip at 120 characters would keep only part of the key
    tracker = Tracker("t", secrets=(key,))
    event = tracker.event("decide", _step(reply={"text": text, "tool_calls": []}))
    assert "kkkk" not in json.dumps(event.record())
    pattern = Tracker("t").event(
        "decide", _step(reply={"text": "y " * 50 + "sk-proj-abcdefghijklmnop1234"})
    )
    assert "sk-proj-abc" not in json.dumps(pattern.record())


def test_a_tool_result_is_the_observation_with_keys_masked() -> None:
    key = "local-secret-key-98765"
    result = ToolMessage(f'{{"token": "{key}", "plan": "pro"}}', tool_call_id="c1")
    update = {"messages": [result], **_step(calls=[{**CALL, "outcome": {"ok": True}}])}
    event = Tracker("t", secrets=(key,)).event("execute", update)
    assert event.decision == "ok"
    assert event.observation is not None
    assert '"plan": "pro"' in event.observation
    assert key not in json.dumps(event.record())


def test_a_gate_stop_names_the_call_that_stopped() -> None:
    """The stopping call is the one the ending names, not the first of the step."""
    first = {**CALL, "id": "c0", "tool": "get_user_profile"}
    stopper = {**CALL, "id": "c1", "tool": "refund"}
    update = _step(calls=[first, stopper], ending={**ENDING, "reason": "tool_denied:refund"})
    assert Tracker("t").event("gate", update).action == {"tool": "refund"}


def test_a_call_of_unknown_outcome_shows_why_not_null() -> None:
    ending = {"reason": "tool_outcome_unknown:ledger__pay", "message": "may have run", "call": "c1"}
    update = _step(calls=[{**CALL, "tool": "ledger__pay"}], ending=ending)
    event = Tracker("t").event("execute", update)
    assert (event.decision, event.observation) == ("error", "tool_outcome_unknown:ledger__pay")


def test_a_question_is_shown_as_the_node_that_asked_it() -> None:
    """A question comes from the node the graph went to after the last event: the gate after
    a call was validated, decide after observe (a spent budget asked about)."""
    approval = (Interrupt({"kind": "approval", "tool": "pay", "args": {"to": "x"}}, id="q"),)
    tracker = _tracked([("validate", _step(reply=REPLY, calls=[CALL]))])
    event = tracker.event("__interrupt__", approval)
    assert (event.node, event.decision) == ("gate", "paused")
    assert event.action == {"kind": "approval", "tool": "pay", "args": {"to": "x"}}
    budget = (Interrupt({"kind": "budget", "tool": "max_steps", "args": {}}, id="b"),)
    done = _step(calls=[{**CALL, "outcome": {"ok": True}}])
    tracker = _tracked([("execute", done), ("observe", {})])
    assert tracker.event("__interrupt__", budget).node == "decide"
    unknown = (Interrupt({"kind": "outcome_unknown", "tool": "pay", "args": {}}, id="u"),)
    assert Tracker("t").event("__interrupt__", unknown).node == "execute"  # a fresh resume


def test_the_counters_are_the_runs_record() -> None:
    """Each event carries the steps, tool calls and tokens the run's record holds at that
    point, and the event that opens the run what it runs under; the last event's counters
    are the run's usage."""
    saver = InMemorySaver()
    model = ScriptedChatModel(replies=[call("get_user_profile", user_id=42), "Anna."])
    graph = build_graph(model, SUPPORT_TOOLS, checkpointer=saver)
    tracker = Tracker("t", saver)
    seen: list[events.Event] = []
    result = run(graph, "who is 42?", thread_id="t", on_update=lambda n, u: seen.append(
        tracker.event(n, u)))  # fmt: skip
    assert [e.node for e in seen] == [
        "decide", "validate", "gate", "execute", "observe", "decide", "validate", "finish",
    ]  # fmt: skip
    assert [(e.step, e.tool_calls) for e in seen] == [(1, 0)] * 2 + [(1, 1)] * 3 + [(2, 1)] * 3
    assert seen[-1].tokens == result["usage"]["tokens"] > seen[0].tokens > 0
    assert seen[0].context is not None
    assert seen[0].context["model"] == "scripted"
    assert [e.context for e in seen[1:]] == [None] * 7
    assert (seen[-1].stop_reason, seen[-1].message) == ("success", "final answer after 2 steps")


def test_a_resumed_run_counts_on_from_its_record() -> None:
    saver = InMemorySaver()
    asking = Policy().replace(require_approval=frozenset({"get_user_billing"}))
    model = ScriptedChatModel(replies=[call("get_user_billing", user_id=42), "USD 49"])
    graph = build_graph(model, SUPPORT_TOOLS, policy=asking, checkpointer=saver)
    assert run(graph, "refund?", thread_id="t")["pending"]
    tracker = Tracker("t", saver)
    assert tracker.make("run", decision="resumed").step == 1  # before anything ran again
    seen: list[events.Event] = []
    resume(graph, "t", {"approved": True}, on_update=lambda n, u: seen.append(
        tracker.event(n, u)))  # fmt: skip
    assert [(e.node, e.decision, e.tool_calls) for e in seen[:2]] == [
        ("gate", "allowed", 1),
        ("execute", "ok", 1),
    ]
    assert "billing" in str(seen[1].observation)


def test_a_run_that_answers_writes_its_answer() -> None:
    finished = {"status": "ok", "stop_reason": "success", "message": "final answer after 1 step",
                "messages": [AIMessage("USD 49")]}  # fmt: skip
    event = Tracker("t").event("finish", finished)
    assert (event.decision, event.action, event.stop_reason) == (
        "answered",
        {"final": "USD 49"},
        "success",
    )
