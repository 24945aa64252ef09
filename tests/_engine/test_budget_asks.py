"""Budgets that ask before they stop, node by node on hand-built state: every budget kind
(steps, tool calls, a tool's cap, seconds, tokens, cost) answered with every decision
(approve, edit, reject), with the human's answer stubbed in for ``ask``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gated_react import Price
from gated_react._engine import budget_checks
from gated_react._engine.approval import Decision
from gated_react._engine.budget_checks import proposal
from gated_react.nodes.gate import gate
from gated_react.nodes.observe import observe
from gated_react.nodes.validate import validate

from ..support.helpers import deps, state

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
BILLING = {"kind": "tool", "name": "get_user_billing", "args": {"user_id": 42}}
RAN = {
    "step": 1,
    "tool": "get_user_profile",
    "args": {"user_id": 42},
    "key": "k",
    "outcome": {"ok": True, "observation": {"name": "Anna"}},
}
PRICED = {"prices": {"scripted": Price(input=1, output=1)}}


@dataclass(frozen=True)
class Case:
    """One budget kind: where it is checked, the state and policy that spend it, the numbers
    the question must show, and a limit a human might set instead."""

    kind: str
    node: str
    fields: dict[str, Any]
    policy: dict[str, Any]
    numbers: tuple[Any, Any, Any]
    """Spent, limit and proposed limit."""
    edited: float


KINDS = [
    Case(*case)
    for case in [
        ("max_steps", "observe", {"usage": {"steps": 2}}, {"max_steps": 2}, (2, 2, 4), 5),
        (
            "max_seconds",
            "observe",
            {"usage": {"steps": 1, "seconds": 20.5}},
            {"max_seconds": 20},
            (20.5, 20.0, 40.5),
            45,
        ),
        (
            "max_tokens",
            "observe",
            {"usage": {"steps": 1, "tokens": 1200}},
            {"max_tokens": 1000},
            (1200, 1000, 2200),
            5000,
        ),
        (
            "max_cost",
            "observe",
            {"usage": {"steps": 1, "cost": 0.5}},
            {"max_cost": 0.5, **PRICED},
            (0.5, 0.5, 1.0),
            2.0,
        ),
        (
            "max_tool_calls",
            "gate",
            {"usage": {"steps": 1, "tool_calls": 2}},
            {"max_tool_calls": 2},
            (2, 2, 4),
            3,
        ),
        (
            "tool_limit:get_user_billing",
            "gate",
            {"usage": {"steps": 1, "tool_calls": 1, "per_tool": {"get_user_billing": 1}}},
            {"tool_limits": {"get_user_billing": 1}},
            (1, 1, 2),
            3,
        ),
    ]
]
IDS = [case.kind for case in KINDS]


class Human:
    """Stands in for ``ask``: gives ``answer`` and keeps what was asked."""

    def __init__(self, answer: Decision) -> None:
        self.answer = answer
        self.asked: list[tuple[dict[str, Any], Any]] = []

    def __call__(self, question: dict[str, Any], check_args: Any = None) -> Decision:
        self.asked.append((question, check_args))
        return self.answer


def _run(
    monkeypatch: pytest.MonkeyPatch,
    answer: Decision,
    node: str,
    fields: dict[str, Any],
    policy: dict[str, Any],
    *,
    pausable: bool = True,
) -> tuple[dict[str, Any], Human]:
    human = Human(answer)
    monkeypatch.setattr(budget_checks, "ask", human)
    monkeypatch.setattr(budget_checks, "can_pause", lambda config: pausable)
    parts = deps(on_budget="ask", **policy)
    if node == "observe":
        return observe(state(calls=[RAN], **fields), CONFIG, deps=parts), human
    return gate(state(action=BILLING, **fields), CONFIG, deps=parts), human


@pytest.mark.parametrize("case", KINDS, ids=IDS)
def test_approve_extends_by_the_proposal_and_records_it(
    monkeypatch: pytest.MonkeyPatch, case: Case
) -> None:
    kind, node, fields, policy = case.kind, case.node, case.fields, case.policy
    update, human = _run(monkeypatch, Decision(approved=True), node, fields, policy)
    [(question, check)] = human.asked
    spent, limit, proposed = case.numbers
    assert question["kind"] == "budget"
    assert question["action_requests"] == [
        {
            "name": kind,
            "args": {"budget": kind, "spent": spent, "limit": limit, "proposed": proposed},
            "description": question["why"],
        }
    ]
    assert question["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    assert question["answers"]["edit"] == {"approved": True, "args": {"limit": proposed}}
    assert "respond" not in question["answers"]  # a budget has nothing to answer in place of
    assert question["why"].startswith(f"{kind.partition(':')[0]} ")
    assert check({"limit": spent}) is not None  # an edit must let the run go on
    assert "stop_reason" not in update
    [extension] = update["extensions"]
    assert (extension["budget"], extension["limit"], extension["decision"]) == (
        kind,
        proposed,
        "approve",
    )
    entry = update["trace"][-1]
    assert (entry["tool"], entry["extended"]) == (
        kind,
        f"{kind} {limit:g} -> {proposed:g} (approve)",
    )
    if node == "gate":
        assert update["calls"][0]["tool"] == "get_user_billing"  # the call goes on


@pytest.mark.parametrize("case", KINDS, ids=IDS)
def test_edit_sets_the_new_limit(monkeypatch: pytest.MonkeyPatch, case: Case) -> None:
    kind, node, fields, policy = case.kind, case.node, case.fields, case.policy
    answer = Decision(approved=True, args={"limit": case.edited}, tool=kind)
    update, _ = _run(monkeypatch, answer, node, fields, policy)
    assert "stop_reason" not in update
    [extension] = update["extensions"]
    assert (extension["limit"], extension["decision"], extension["was"]) == (
        case.edited,
        "edit",
        case.numbers[1],
    )


@pytest.mark.parametrize("case", KINDS, ids=IDS)
def test_reject_stops_with_the_budgets_own_reason(
    monkeypatch: pytest.MonkeyPatch, case: Case
) -> None:
    kind, node, fields, policy = case.kind, case.node, case.fields, case.policy
    update, _ = _run(monkeypatch, Decision(approved=False, reason="enough"), node, fields, policy)
    assert update["stop_reason"] == kind
    assert update["message"].endswith("; a human declined: enough")
    assert "extensions" not in update


@pytest.mark.parametrize("case", KINDS, ids=IDS)
def test_without_a_checkpointer_the_budget_stops_as_before(
    monkeypatch: pytest.MonkeyPatch, case: Case
) -> None:
    kind, node, fields, policy = case.kind, case.node, case.fields, case.policy
    update, human = _run(monkeypatch, Decision(approved=True), node, fields, policy, pausable=False)
    assert update["stop_reason"] == kind
    assert human.asked == []


def test_the_default_policy_stops_without_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    human = Human(Decision(approved=True))
    monkeypatch.setattr(budget_checks, "ask", human)
    monkeypatch.setattr(budget_checks, "can_pause", lambda config: True)
    update = observe(state(calls=[RAN], usage={"steps": 2}), CONFIG, deps=deps(max_steps=2))
    assert update["stop_reason"] == "max_steps"
    assert human.asked == []


def test_a_loop_is_not_a_budget_and_never_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    human = Human(Decision(approved=True))
    monkeypatch.setattr(budget_checks, "ask", human)
    monkeypatch.setattr(budget_checks, "can_pause", lambda config: True)
    seen = state(action=BILLING, usage={"steps": 2, "tool_calls": 1}).seen
    from gated_react._engine.call_keys import loop_key

    repeat = state(
        action=BILLING,
        usage={"steps": 2, "tool_calls": 1},
        seen=[*seen, loop_key("get_user_billing", {"user_id": 42})],
    )
    update = gate(repeat, CONFIG, deps=deps(on_budget="ask"))
    assert update["stop_reason"] == "loop_detected"
    assert human.asked == []


def test_an_unknown_cost_is_not_asked_about(monkeypatch: pytest.MonkeyPatch) -> None:
    human = Human(Decision(approved=True))
    monkeypatch.setattr(budget_checks, "ask", human)
    monkeypatch.setattr(budget_checks, "can_pause", lambda config: True)
    unknown = {"steps": 1, "cost": None, "unpriced": "a reply of scripted reported no tokens"}
    parts = deps(on_budget="ask", max_cost=1, **PRICED)
    update = observe(state(calls=[RAN], usage=unknown), CONFIG, deps=parts)
    assert update["stop_reason"] == "max_cost"
    assert human.asked == []


def test_validate_asks_before_a_retry_too(monkeypatch: pytest.MonkeyPatch) -> None:
    human = Human(Decision(approved=True))
    monkeypatch.setattr(budget_checks, "ask", human)
    monkeypatch.setattr(budget_checks, "can_pause", lambda config: True)
    parts = deps(on_budget="ask", max_steps=3, protocol="json", on_invalid_action="retry")
    update = validate(state(reply={"text": "hmm"}, usage={"steps": 3}), CONFIG, deps=parts)
    assert update["retry"]["why"]
    assert update["extensions"][0]["limit"] == 6


def test_two_spent_budgets_ask_one_after_the_other(monkeypatch: pytest.MonkeyPatch) -> None:
    human = Human(Decision(approved=True))
    monkeypatch.setattr(budget_checks, "ask", human)
    monkeypatch.setattr(budget_checks, "can_pause", lambda config: True)
    spent = {"steps": 2, "tokens": 500}
    parts = deps(on_budget="ask", max_steps=2, max_tokens=500)
    update = observe(state(calls=[RAN], usage=spent), CONFIG, deps=parts)
    assert [q["tool"] for q, _ in human.asked] == ["max_steps", "max_tokens"]
    assert [e["budget"] for e in update["extensions"]] == ["max_steps", "max_tokens"]


def test_a_cap_of_zero_still_offers_one_call() -> None:
    assert proposal("max_tool_calls", 0, 0) == 1  # a cap of 0 still offers one call


def test_the_approvals_guide_says_what_a_proposed_limit_is() -> None:
    """Before: "as much again", which a run stopped past its limit does not get: 0.0241 USD
    spent of 0.01 is offered 0.0341 (spent plus the limit), not 0.02."""
    from gated_react._engine.budget_checks import proposal

    from ..support.docs import DOCS

    guide = (DOCS / "guides" / "approvals.md").read_text()
    assert "as much\nagain" not in guide
    assert proposal("max_cost", 0.0241, 0.01) == 0.0341
    assert "`0.0341` for `0.0241` spent of `0.01`" in guide
    assert proposal("max_steps", 1, 1) == 2  # "twice the limit when the run stopped right at it"
