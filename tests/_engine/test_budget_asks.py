"""Budgets that ask before they stop, node by node: every budget kind (steps, seconds, tokens,
cost before a decision; tool calls and a tool's cap at the gate), spent in the run's record,
answered with every decision (approve, edit, reject), with the human's answer stubbed in for
``ask``. An extension is a record of the run, and what the trace shows of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Budget, Price
from gated_react._engine.authority import audit, budgets
from gated_react._engine.authority.approval import Decision
from gated_react._engine.authority.budgets import proposal
from gated_react._engine.authority.ledger import Book, Place
from gated_react._engine.authority.limits import check_seconds
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.conversation.chat import result
from gated_react._engine.langgraph_internals import CONFIG_KEY_CHECKPOINTER
from gated_react.nodes.decide import decide
from gated_react.nodes.gate import gate
from gated_react.state import Usage

from ..support.helpers import QUESTION_ID, deps, state

BILLING = {"id": "c9", "tool": "get_user_billing", "args": {"user_id": 42}}
PRICED = {"prices": {"scripted": Price(input=1, output=1)}}


def _paid(n: int, **body: Any) -> Record:
    """Model call ``n`` of the run, paid: what it spent."""
    return Record("t1", QUESTION_ID, Kind.PAID, f"m{n}", {"tokens": 0, "cost": 0.0, **body})


def _permit(n: int, tool: str = "get_user_profile") -> Record:
    return Record("t1", QUESTION_ID, Kind.PERMIT, f"k{n}", {"call": f"c{n}", "tool": tool})


@dataclass(frozen=True)
class Case:
    """One budget kind: the node that checks it, what the run's record holds, the policy, the
    numbers the question must show, and a limit a human might set instead."""

    kind: str
    node: str
    spent: tuple[Record, ...]
    policy: dict[str, Any]
    numbers: tuple[Any, Any, Any]
    """Spent, limit and proposed limit."""
    edited: float


KINDS = [
    Case("max_steps", "decide", (_paid(1), _paid(2)), {"max_steps": 2}, (2, 2, 4), 5),
    Case("max_seconds", "decide", (_paid(1, seconds=20.5),), {"max_seconds": 20},
         (20.5, 20.0, 40.5), 45),
    Case("max_tokens", "decide", (_paid(1, tokens=1200),), {"max_tokens": 1000},
         (1200, 1000, 2200), 5000),
    Case("max_cost", "decide", (_paid(1, cost=0.5),), {"max_cost": 0.5, **PRICED},
         (0.5, 0.5, 1.0), 2.0),
    Case("max_tool_calls", "gate", (_paid(1), _permit(1), _permit(2)), {"max_tool_calls": 2},
         (2, 2, 4), 3),
    Case("tool_limit:get_user_billing", "gate", (_paid(1), _permit(1, "get_user_billing")),
         {"tool_limits": {"get_user_billing": 1}}, (1, 1, 2), 3),
]  # fmt: skip
IDS = [case.kind for case in KINDS]


class Human:
    """Stands in for ``ask``: gives ``answer`` and keeps what was asked."""

    def __init__(self, answer: Decision) -> None:
        self.answer = answer
        self.asked: list[tuple[dict[str, Any], Any]] = []

    def __call__(self, question: dict[str, Any], check_args: Any = None) -> Decision:
        self.asked.append((question, check_args))
        return self.answer


class Ran:
    """A node run on a thread whose record holds what the run spent."""

    def __init__(self, spent: Sequence[Record]) -> None:
        self.config: Any = {
            "configurable": {"thread_id": "t1", CONFIG_KEY_CHECKPOINTER: InMemorySaver()}
        }
        self.place = Place.of(self.config)
        self.place.ledger.append(list(spent))
        self.update: dict[str, Any] = {}

    def node(self, node: str, parts: Any, messages: Sequence[BaseMessage] = (), **step: Any) -> Any:
        if node == "gate":
            step = {"calls": [BILLING], **step}
        run = decide if node == "decide" else gate
        self.update = run(state(messages=messages, **step), self.config, deps=parts)
        return self

    @property
    def book(self) -> Book:
        return self.place.ledger.book("t1", QUESTION_ID)

    def extended(self) -> list[dict[str, Any]]:
        return [r.body for r in self.book.records if r.kind is Kind.EXTENDED]

    def ending(self) -> dict[str, Any] | None:
        ending: dict[str, Any] | None = (self.update.get("step") or {}).get("ending")
        return ending


def _asking(monkeypatch: pytest.MonkeyPatch, answer: Decision, *, pausable: bool = True) -> Human:
    human = Human(answer)
    monkeypatch.setattr(budgets, "ask", human)
    monkeypatch.setattr(budgets, "can_pause", lambda config: pausable)
    return human


def _run(monkeypatch: pytest.MonkeyPatch, answer: Decision, case: Case, *,
         pausable: bool = True) -> tuple[Ran, Human]:  # fmt: skip
    human = _asking(monkeypatch, answer, pausable=pausable)
    parts = deps(["done"], on_budget="ask", **case.policy)
    return Ran(case.spent).node(case.node, parts), human


@pytest.mark.parametrize("case", KINDS, ids=IDS)
def test_approve_extends_by_the_proposal_and_records_it(
    monkeypatch: pytest.MonkeyPatch, case: Case
) -> None:
    ran, human = _run(monkeypatch, Decision(approved=True), case)
    [(question, check)] = human.asked
    kind, (spent, limit, proposed) = case.kind, case.numbers
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
    assert ran.ending() is None
    [extension] = ran.extended()
    assert (extension["budget"], extension["limit"], extension["decision"]) == (
        kind,
        proposed,
        "approve",
    )
    assert ran.book.tally.extensions[0].limit == proposed  # the run's limits from now on
    traced = audit.trace(ran.book.records)
    entry = traced[sum(r.kind is Kind.PERMIT for r in case.spent)]  # after the calls before
    assert (entry.tool, entry.extended) == (kind, f"{kind} {limit:g} -> {proposed:g} (approve)")
    if case.node == "gate":
        assert ran.update["step"]["calls"][0]["tool"] == "get_user_billing"  # the call goes on
        assert traced[-1].tool == "get_user_billing"  # let through under the new limit
    else:
        assert ran.update["step"]["reply"]["text"] == "done"  # the model was asked


@pytest.mark.parametrize("case", KINDS, ids=IDS)
def test_edit_sets_the_new_limit(monkeypatch: pytest.MonkeyPatch, case: Case) -> None:
    answer = Decision(approved=True, args={"limit": case.edited}, tool=case.kind)
    ran, _ = _run(monkeypatch, answer, case)
    assert ran.ending() is None
    [extension] = ran.extended()
    assert (extension["limit"], extension["decision"], extension["was"]) == (
        case.edited,
        "edit",
        case.numbers[1],
    )


@pytest.mark.parametrize("case", KINDS, ids=IDS)
def test_reject_stops_with_the_budgets_own_reason(
    monkeypatch: pytest.MonkeyPatch, case: Case
) -> None:
    ran, _ = _run(monkeypatch, Decision(approved=False, reason="enough"), case)
    ending = ran.ending()
    assert ending is not None
    assert ending["reason"] == case.kind
    assert ending["message"].endswith("; a human declined: enough")
    assert ran.extended() == []
    assert "stop_reason" not in ran.update  # the stop node writes the end


@pytest.mark.parametrize("case", KINDS, ids=IDS)
def test_without_a_checkpointer_the_budget_stops_as_before(
    monkeypatch: pytest.MonkeyPatch, case: Case
) -> None:
    ran, human = _run(monkeypatch, Decision(approved=True), case, pausable=False)
    ending = ran.ending()
    assert ending is not None
    assert ending["reason"] == case.kind
    assert human.asked == []


def test_the_default_policy_stops_without_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    human = _asking(monkeypatch, Decision(approved=True))
    ran = Ran([_paid(1), _paid(2)]).node("decide", deps(["done"], max_steps=2))
    assert (ran.ending() or {}).get("reason") == "max_steps"
    assert human.asked == []


def test_a_loop_is_not_a_budget_and_never_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    human = _asking(monkeypatch, Decision(approved=True))
    done = [
        AIMessage(
            "", tool_calls=[{"name": "get_user_billing", "args": {"user_id": 42}, "id": "c1"}]
        ),
        result("get_user_billing", "c1", '{"plan": "pro"}', ok=True),
    ]
    ran = Ran([_paid(1), _permit(1, "get_user_billing")])
    ran.node("gate", deps(on_budget="ask"), done)
    assert (ran.ending() or {}).get("reason") == "loop_detected"
    assert human.asked == []


def test_an_unknown_cost_is_not_asked_about(monkeypatch: pytest.MonkeyPatch) -> None:
    human = _asking(monkeypatch, Decision(approved=True))
    unknown = _paid(1, cost=None, unpriced="a reply of scripted reported no tokens")
    ran = Ran([unknown]).node("decide", deps(["done"], on_budget="ask", max_cost=1, **PRICED))
    ending = ran.ending()
    assert ending is not None
    assert ending["reason"] == "max_cost"
    assert "cannot be checked: a reply of scripted reported no tokens" in ending["message"]
    assert human.asked == []


def test_a_retry_asks_before_it_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed reply is retried by a new decision, under the same budgets."""
    human = _asking(monkeypatch, Decision(approved=True))
    parts = deps(["done"], on_budget="ask", max_steps=3, protocol="json")
    retry = {"why": "bad_json", "message": "not JSON", "count": 1}
    ran = Ran([_paid(1), _paid(2), _paid(3)]).node("decide", parts, retry=retry)
    assert [q["tool"] for q, _ in human.asked] == ["max_steps"]
    assert ran.extended()[0]["limit"] == 6


def test_two_spent_budgets_ask_one_after_the_other(monkeypatch: pytest.MonkeyPatch) -> None:
    human = _asking(monkeypatch, Decision(approved=True))
    parts = deps(["done"], on_budget="ask", max_steps=2, max_tokens=500)
    ran = Ran([_paid(1, tokens=250), _paid(2, tokens=250)]).node("decide", parts)
    assert [q["tool"] for q, _ in human.asked] == ["max_steps", "max_tokens"]
    assert [e["budget"] for e in ran.extended()] == ["max_steps", "max_tokens"]


def test_an_extension_holds_for_its_run_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next question on the thread is a new run, with the policy's own limits."""
    human = _asking(monkeypatch, Decision(approved=True))
    parts = deps(["done", "done"], on_budget="ask", max_steps=1)
    ran = Ran([_paid(1)]).node("decide", parts)
    assert [q["tool"] for q, _ in human.asked] == ["max_steps"]
    ran.place.ledger.append([Record("t1", "q-2", Kind.PAID, "m9", {"tokens": 0})])
    asked_again = {
        "messages": [*state()["messages"], AIMessage("done"), HumanMessage("And now?", id="q-2")],
        "step": {"run": "q-2"},
    }
    decide(asked_again, ran.config, deps=parts)  # type: ignore[arg-type]
    assert [q["tool"] for q, _ in human.asked] == ["max_steps", "max_steps"]
    assert ran.place.ledger.book("t1", "q-2").tally.extensions[0].was == 1


def test_a_cap_of_zero_still_offers_one_call() -> None:
    assert proposal("max_tool_calls", 0, 0) == 1  # a cap of 0 still offers one call


def test_the_approvals_guide_says_what_a_proposed_limit_is() -> None:
    """Before: "as much again", which a run stopped past its limit does not get: 0.0241 USD
    spent of 0.01 is offered 0.0341 (spent plus the limit), not 0.02."""
    from ..support.docs import DOCS

    guide = (DOCS / "guides" / "approvals.md").read_text()
    assert "as much\nagain" not in guide
    assert proposal("max_cost", 0.0241, 0.01) == 0.0341
    assert "`0.0341` for `0.0241` spent of `0.01`" in guide
    assert proposal("max_steps", 1, 1) == 2  # "twice the limit when the run stopped right at it"


def test_a_time_question_speaks_in_hundredths_of_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: "max_seconds (3.000260224005615 spent of 3.0)", offered 6.00026. Seconds are
    offered in hundredths, rounded up (never below what is spent plus the limit)."""
    assert proposal("max_seconds", 3.000260224005615, 3.0) == 6.01
    assert proposal("max_seconds", 2.5, 3.0) == 6.0
    human = Human(Decision(approved=True))
    monkeypatch.setattr(budgets, "ask", human)
    stop = check_seconds(Usage(seconds=3.000260224005615), Budget(max_seconds=3))
    assert stop is not None
    budgets.extend(stop, 3.000260224005615, 3.0, 1)
    ((asked, _),) = human.asked
    shown = asked["args"]
    assert (shown["spent"], shown["limit"], shown["proposed"]) == (3.0, 3.0, 6.01)
