"""The decision an event shows after a routed node is the branch ``gated_react.routing`` takes on
that node's update: the CLI never decides again what the graph already decided."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, get_args

import pytest

from gated_react import routing
from gated_react.records import events
from gated_react.records.events import Tracker

CALL = {"step": 1, "tool": "get_user_billing", "args": {"user_id": 42}, "key": "k"}
REFUSAL = {"ok": False, "observation": "no", "error": "tool_denied:refund"}
TRACE = [{"step": 1, "tool": "refund", "args_hash": "h", "ok": False}]

# node, its router, the router's branch type, the words the CLI shows for its branches
ROUTED: list[tuple[str, Callable[..., str], Any, dict[Any, str]]] = [
    ("decide", routing.after_decide, routing.AfterDecide, events.DECIDE_WORDS),
    ("validate", routing.after_validate, routing.AfterValidate, events.VALIDATE_WORDS),
    ("gate", routing.after_gate, routing.AfterGate, events.GATE_WORDS),
    ("observe", routing.after_observe, routing.AfterObserve, events.OBSERVE_WORDS),
]

# updates as the nodes write them, and the decision the live view and run log show today
UPDATES: list[tuple[str, dict[str, Any], str]] = [
    ("decide", {"reply": {"text": "", "tool_calls": [{"name": "x", "args": {}}]}}, "proposed"),
    ("decide", {"reply": None, "stop_reason": "llm_timeout", "message": "slow"}, "failed"),
    ("validate", {"action": {"kind": "tool", "name": "x", "args": {}}}, "tool"),
    ("validate", {"action": {"kind": "final", "answer": "42"}, "retry": None}, "final"),
    ("validate", {"action": None, "retry": {"why": "bad_json", "count": 1}}, "retry"),
    ("validate", {"action": None, "stop_reason": "invalid_action:bad_json"}, "invalid"),
    ("gate", {"calls": [CALL], "usage": {"steps": 1}}, "allowed"),
    ("gate", {"calls": [{**CALL, "outcome": REFUSAL}]}, "refused"),
    ("gate", {"stop_reason": "loop_detected", "message": "again", "trace": TRACE}, "stopped"),
    ("observe", {"trace": TRACE, "calls": [], "history": [{}]}, "next"),
    ("observe", {"trace": TRACE, "stop_reason": "max_steps", "message": "8"}, "stopped"),
]


@pytest.mark.parametrize(("node", "router", "branches", "words"), ROUTED)
def test_every_branch_of_every_router_has_a_word(
    node: str, router: Callable[..., str], branches: Any, words: dict[Any, str]
) -> None:
    assert set(words) == set(get_args(branches))


@pytest.mark.parametrize(("node", "update", "decision"), UPDATES)
def test_the_decision_is_the_routers_branch(
    node: str, update: dict[str, Any], decision: str
) -> None:
    router, words = next((r, w) for n, r, _, w in ROUTED if n == node)
    assert Tracker("t").event(node, update).decision == decision == words[router(update)]


@pytest.mark.parametrize(("node", "router", "branches", "words"), ROUTED)
def test_events_ask_the_router(
    node: str,
    router: Callable[..., str],
    branches: Any,
    words: dict[Any, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever branch the router names is what the event shows, on one and the same update."""
    update = next(u for n, u, _ in UPDATES if n == node)
    for branch in get_args(branches):
        seen: list[dict[str, Any]] = []
        monkeypatch.setattr(routing, router.__name__, _answering(branch, seen))
        assert Tracker("t").event(node, update).decision == words[branch]
        assert seen == [update]


def _answering(branch: str, seen: list[dict[str, Any]]) -> Callable[[dict[str, Any]], str]:
    """A stand-in router that records what it was given and names ``branch``."""

    def router(state: dict[str, Any]) -> str:
        seen.append(state)
        return branch

    return router


def test_a_refusal_shows_the_tool_and_its_error() -> None:
    event = Tracker("t").event("gate", {"calls": [{**CALL, "outcome": REFUSAL}]})
    assert event.action == {"tool": "get_user_billing", "args": {"user_id": 42}}
    assert event.observation == "tool_denied:refund"


def test_a_key_is_masked_before_the_text_is_clipped() -> None:
    key = "k" * 20 + "SECRETSECRET"
    text = "x" * 100 + key  # the clip at 120 characters would keep only part of the key
    tracker = Tracker("t", secrets=(key,))
    update = {"reply": {"text": text, "tool_calls": []}}
    event = tracker.event("decide", update)
    assert "kkkk" not in json.dumps(event.record())
    pattern = Tracker("t").event(
        "decide", {"reply": {"text": "y " * 50 + "sk-proj-abcdefghijklmnop1234"}}
    )
    assert "sk-proj-abc" not in json.dumps(pattern.record())


def test_a_gate_stop_after_an_extension_names_the_call_that_stopped() -> None:
    """The gate traces a budget a human extended before the call that then stopped the run:
    the event names that call (it named the budget before the fix)."""
    extended = {"step": 2, "tool": "max_tool_calls", "args_hash": "h", "ok": True}
    stopper = {"step": 2, "tool": "refund", "args_hash": "h", "ok": False}
    update = {
        "stop_reason": "tool_denied:refund",
        "trace": [{**extended, "extended": "max_tool_calls 1 -> 2 (approve)"}, stopper],
        "extensions": [{"budget": "max_tool_calls", "limit": 2}],
    }
    tracker = Tracker("t")
    event = tracker.event("gate", update)
    assert event.action == {"tool": "refund"}
    assert tracker.extensions == update["extensions"]


def test_the_tool_call_count_is_the_runs_own_after_a_call_that_stopped_it() -> None:
    """A call whose outcome is unknown after a crash counts against the budget but is kept out
    of the history: the live view said tools 0 (history) where --json said 1 (usage)."""
    tracker = Tracker("t", usage={"steps": 1, "tool_calls": 1})
    update = {"trace": [{"step": 1, "tool": "pay", "ok": False}], "calls": []}
    assert tracker.event("observe", update).tool_calls == 1


def test_a_call_of_unknown_outcome_shows_why_not_null() -> None:
    stopped = {"ok": False, "error": "tool_outcome_unknown:ledger__pay"}
    update = {"calls": [{**CALL, "tool": "ledger__pay", "outcome": stopped}]}
    event = Tracker("t").event("execute", update)
    assert event.observation == "tool_outcome_unknown:ledger__pay"
