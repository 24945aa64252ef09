"""execute's ``Plan``, step by step as ``nodes/execute.py`` takes it: a call runs under a valid
permit, or after the gate's checks again; a call that is not idempotent is claimed before it
runs, once per key; found done, it is answered from its record; found started and never done,
its outcome is unknown: a human is asked under approval, else the run stops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from gated_react._engine.authority import started
from gated_react._engine.authority.admit import Gatekeeper, gatekeeper
from gated_react._engine.authority.approval import Decision
from gated_react._engine.authority.ledger import Place
from gated_react._engine.authority.records import Kind
from gated_react._engine.authority.run_once import Plan
from gated_react._engine.authority.ways import planned
from gated_react._engine.deps import NodeDeps
from gated_react._engine.execution.call_keys import args_hash
from gated_react._engine.langgraph_internals import CONFIG_KEY_CHECKPOINTER
from gated_react.state import Call, Shown, Step

from ...support.fakes import lookup, pay
from ...support.helpers import QUESTION_ID, deps

TOOLS = [pay, lookup]
PAY = Call(id="c1", tool="pay", args={"item": "book"})
LOOK = Call(id="c2", tool="lookup", args={"q": "book"})


class Run:
    """Run ``q-1`` of thread ``t1`` on a saver of its own: its gate, then its execute."""

    def __init__(
        self, saver: Any = None, thread: str = "t1", question: str = QUESTION_ID, **fields: Any
    ) -> None:
        self.question = question
        self.deps: NodeDeps = deps(tools=TOOLS, **fields)
        self.config: Any = {
            "configurable": {"thread_id": thread, CONFIG_KEY_CHECKPOINTER: saver or InMemorySaver()}
        }
        self.place = Place.of(self.config)
        self.messages: list[BaseMessage] = [HumanMessage("buy a book", id=question)]

    @property
    def ledger(self) -> Any:
        return self.place.ledger

    def gated(self, *calls: Call) -> list[Call]:
        """The calls as the gate lets them through, their permits in the record."""
        keeper = self.keeper()
        admitted = [keeper.admit(call) for call in calls]
        self.ledger.append(keeper.records)
        assert all(isinstance(call, Call) for call in admitted)
        return admitted  # type: ignore[return-value]

    def keeper(self) -> Gatekeeper:
        """The gate's checks for this run, as the gate node makes them."""
        return gatekeeper(self._step(), self.messages, **self._parts())

    def plan(self, *calls: Call, claim: bool = True) -> Plan:
        """execute up to the calls it runs: what it found, planned, recorded and (unless
        ``claim`` is False: what the record alone decided) claimed."""
        step = self._step(calls)
        plan = Plan.of(step, self.messages, **self._parts())
        plan.found(self.ledger.about(plan.once_keys()))
        planned(plan)
        self.ledger.append(plan.records)
        if claim:
            plan.claimed([self.ledger.claim(record) for record in plan.claims()])
        return plan

    def record(self, kind: Kind, call: Call, **body: Any) -> None:
        self.ledger.append([self.place.record(self.question, kind, call.key, call=call.id,
                                              tool=call.tool, **body)])  # fmt: skip

    def kinds(self) -> list[str]:
        return [str(r.kind) for r in self._book().records]

    def _step(self, calls: Sequence[Call] = ()) -> Step:
        return Step(run=self.question, calls=list(calls))

    def _parts(self) -> dict[str, Any]:
        return {"book": self._book(), "place": self.place, "deps": self.deps,
                "config": self.config}  # fmt: skip

    def _book(self) -> Any:
        return self.ledger.book(self.place.thread, self.question)


def test_a_call_under_a_valid_permit_runs_and_one_not_idempotent_is_claimed_first() -> None:
    run = Run()
    paying, looking = run.gated(PAY, LOOK)
    plan = run.plan(paying, looking)
    assert (plan.to_run(), plan.once, plan.stop) == ([0, 1], [0], None)
    assert plan.records == []  # no second admission: the permits hold
    assert run.kinds() == ["permit", "permit", "started"]
    (started,) = [r for r in run.ledger.about([paying.key]) if r.kind is Kind.STARTED]
    assert started.body == {"call": "c1", "tool": "pay", "args_hash": args_hash(PAY.args)}


def test_a_call_without_a_valid_permit_goes_through_the_gate_again() -> None:
    """An edit after the gate (another argument), a call no gate saw, a permit another
    process signed: a new proposal, admitted here and permitted anew."""
    run = Run()
    (paying,) = run.gated(PAY)
    edited = paying.model_copy(update={"args": {"item": "car"}})
    plan = run.plan(edited)
    assert plan.to_run() == [0]
    (permit,) = plan.records
    assert (permit.kind, permit.body["args"]) == (Kind.PERMIT, '{"item":"car"}')
    assert plan.calls[0].key != paying.key  # its own key: another call
    assert Run().plan(PAY).records[0].kind is Kind.PERMIT  # never gated at all


def test_a_call_the_gate_would_refuse_does_not_run_whatever_the_state_says() -> None:
    run = Run(allow=frozenset({"lookup"}))
    plan = run.plan(PAY)
    assert plan.to_run() == []
    assert plan.stop is not None
    stop, call_id = plan.stop
    assert (str(stop), call_id) == ("tool_denied:pay", "c1")
    assert stop.message.endswith("the state held this call, but the gate did not let it through")


def test_a_call_found_done_is_answered_from_its_record_and_not_run_again() -> None:
    """A replay, a fork, a copy, an answer sent twice: the record says it ran, and what the
    model was shown."""
    run = Run()
    (paying,) = run.gated(PAY)
    run.record(Kind.STARTED, paying)
    run.record(Kind.DONE, paying, ok=True, shown="paid book", seconds=0.1)
    plan = run.plan(paying.model_copy(update={"id": "c9"}))  # proposed again, a new id
    assert plan.to_run() == []
    assert plan.stop is None
    answer = plan.answers[0]
    assert isinstance(answer, ToolMessage)
    assert (answer.text, answer.tool_call_id, answer.status) == ("paid book", "c9", "success")


def test_a_call_found_started_and_never_done_stops_the_run() -> None:
    run = Run()
    (paying,) = run.gated(PAY)
    run.record(Kind.STARTED, paying)  # the process died while it ran
    plan = run.plan(paying, claim=False)  # found in the record, before any claim
    assert plan.to_run() == []
    assert plan.stop is not None
    stop, call_id = plan.stop
    assert (str(stop), call_id) == ("tool_outcome_unknown:pay", "c1")
    assert "may already have run" in stop.message
    # named with its arguments: a program's thread has no run log, its trace only their hash
    named = 'check with the system pay talks to whether pay({"item":"book"}) happened'
    assert named in stop.message


def test_an_idempotent_call_is_never_claimed_and_runs_again() -> None:
    run = Run()
    (looking,) = run.gated(LOOK)
    run.record(Kind.STARTED, looking)
    plan = run.plan(looking)
    assert (plan.to_run(), plan.once, plan.stop) == ([0], [], None)
    assert plan.claims() == []


def test_a_call_another_process_claimed_first_is_of_unknown_outcome() -> None:
    run = Run()
    (paying,) = run.gated(PAY)
    step = Step(run=QUESTION_ID, calls=[paying])
    plan = Plan.of(step, run.messages, **run._parts())
    plan.found(run.ledger.about(plan.once_keys()))
    planned(plan)
    assert run.ledger.claim(plan.claims()[0])  # the other process, between check and claim
    plan.claimed([run.ledger.claim(record) for record in plan.claims()])
    assert plan.to_run() == []
    assert plan.stop is not None
    assert str(plan.stop[0]) == "tool_outcome_unknown:pay"


def test_a_copied_thread_finds_the_call_by_its_id() -> None:
    """The copy has another thread (another key), but keeps its calls' ids."""
    saver = InMemorySaver()
    first = Run(saver)
    (paying,) = first.gated(PAY)
    first.record(Kind.STARTED, paying)
    copy = Run(saver, thread="copy")
    (again,) = copy.gated(PAY)
    assert again.key != paying.key
    plan = copy.plan(again, claim=False)
    assert plan.stop is not None
    assert str(plan.stop[0]) == "tool_outcome_unknown:pay"


def test_an_unrelated_runs_record_under_the_same_call_id_decides_nothing() -> None:
    """Models that number their calls anew in every run (``call_1``) are common; another
    thread's call of another tool under that id says nothing of this call."""
    saver = InMemorySaver()
    other = Run(saver, thread="other")
    (looked,) = other.gated(Call(id="call_1", tool="lookup", args={"q": "weather"}))
    other.record(Kind.DONE, looked, ok=True, shown="sunny", seconds=0.1)
    run = Run(saver)
    (paying,) = run.gated(PAY.model_copy(update={"id": "call_1"}))
    plan = run.plan(paying)
    assert plan.answers == {}
    assert plan.to_run() == [0]


@pytest.mark.parametrize("thread", ["t1", "other"])
def test_the_same_call_under_the_same_id_in_another_run_runs_again(thread: str) -> None:
    """A new question is a new run: a call it makes (the same tool, the same arguments, the
    same ``call_1`` a model numbers every run's calls with) runs, whatever an earlier run did."""
    saver = InMemorySaver()
    numbered = PAY.model_copy(update={"id": "call_1"})
    earlier = Run(saver, thread=thread, question="q-earlier")
    (paid,) = earlier.gated(numbered)
    earlier.record(Kind.DONE, paid, ok=True, shown="paid book", seconds=0.1)
    run = Run(saver, thread=thread)
    (paying,) = run.gated(numbered)
    plan = run.plan(paying)
    assert (plan.answers, plan.to_run(), plan.stop) == ({}, [0], None)


class Human:
    def __init__(self, decision: Decision) -> None:
        self.decision, self.asked = decision, []

    def __call__(self, question: dict[str, Any], check: Any = None) -> Decision:
        self.asked.append(question)
        return self.decision


def _started_under_approval(
    monkeypatch: pytest.MonkeyPatch, decision: Decision
) -> tuple[Plan, Human]:
    human = Human(decision)
    monkeypatch.setattr(started, "ask", human)
    run = Run(require_approval=frozenset({"pay"}))
    paying = run.keeper().admit(PAY, ask_here=False)
    assert isinstance(paying, Call)
    run.record(Kind.STARTED, paying)
    return run.plan(paying), human


def test_under_approval_a_call_of_unknown_outcome_is_asked_about(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    again, human = _started_under_approval(monkeypatch, Decision(approved=True))
    (asked,) = human.asked
    assert asked["kind"] == "outcome_unknown"
    assert "Approve to run it again" in asked["why"]
    assert (again.to_run(), again.once, again.stop) == ([0], [], None)  # run again, unclaimed
    told, _ = _started_under_approval(
        monkeypatch, Decision(approved=False, response="it went through")
    )
    assert told.to_run() == []
    assert (told.answers[0].text, told.answers[0].status) == ("it went through", "success")
    refused, _ = _started_under_approval(monkeypatch, Decision(approved=False, reason="no"))
    assert refused.stop is not None
    assert str(refused.stop[0]) == "tool_outcome_unknown:pay"


def test_a_call_shown_to_the_model_is_answered_with_what_it_is_shown() -> None:
    run = Run()
    shown = PAY.model_copy(update={"shown": Shown(text="not allowed", error="tool_denied:pay")})
    plan = run.plan(shown)
    assert plan.to_run() == []
    assert (plan.answers[0].text, plan.answers[0].status) == ("not allowed", "error")


def test_a_call_that_ran_is_closed_with_what_the_model_was_shown() -> None:
    run = Run()
    (paying,) = run.gated(PAY)
    plan = run.plan(paying)
    update = plan.completed([(0, "paid book", None, 0.25)])
    (done,) = plan.records
    assert (done.kind, done.key) == (Kind.DONE, paying.key)
    assert done.body == {"call": "c1", "tool": "pay", "args_hash": args_hash(PAY.args), "ok": True,
                         "error": None, "seconds": 0.25, "shown": "paid book"}  # fmt: skip
    (message,) = update["messages"]
    assert (message.text, message.tool_call_id) == ("paid book", "c1")
    failed = run.plan(LOOK)
    update = failed.completed([(0, None, RuntimeError("down"), 0.5)])
    (done,) = failed.records
    assert (done.body["ok"], done.body["error"]) == (False, "tool_error:lookup")
    assert update["step"]["ending"]["reason"] == "tool_error:lookup"
