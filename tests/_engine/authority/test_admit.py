"""The gate's checks (``Gatekeeper.admit``), one path each: a call let through leaves a permit
naming exactly it; a refusal shown to the model leaves a ``refused`` record; budgets count from
the run's record (a call the record counts already is not counted again); a human's approval,
edit, answer and rejection; and ``permitted``, which holds a permit to exactly its call."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from gated_react._engine.authority import admit as admitting
from gated_react._engine.authority.admit import Gatekeeper, gatekeeper
from gated_react._engine.authority.approval import Decision
from gated_react._engine.authority.known import permitted
from gated_react._engine.authority.ledger import Place
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.conversation.chat import result
from gated_react._engine.deps import NodeDeps
from gated_react._engine.execution.call_keys import args_hash
from gated_react._engine.langgraph_internals import CONFIG_KEY_CHECKPOINTER
from gated_react.state import Call, Step
from gated_react.state.calls import canonical_json
from gated_react.stops import Stop, StopReason

from ...support.helpers import QUESTION_ID, REFUND_GOAL, deps

BILLING = Call(id="c1", tool="get_user_billing", args={"user_id": 42})


def _config(saved: bool = True) -> Any:
    conf: dict[str, Any] = {"thread_id": "t1"}
    if saved:
        conf[CONFIG_KEY_CHECKPOINTER] = InMemorySaver()
    return {"configurable": conf}


def _ran(tool: str, call_id: str, **args: Any) -> list[BaseMessage]:
    """A step of the run that called ``tool`` and got its result."""
    asked = AIMessage(
        "", tool_calls=[{"name": tool, "args": args, "id": call_id}], id=f"a-{call_id}"
    )
    return [asked, result(tool, call_id, "ok", ok=True)]


def _keeper(
    parts: NodeDeps, earlier: Sequence[BaseMessage] = (), saved: bool = True,
    records: Sequence[Record] = (),
) -> Gatekeeper:  # fmt: skip
    """The gate of run ``q-1`` on thread ``t1``, its record holding ``records``."""
    config = _config(saved)
    place = Place.of(config)
    place.ledger.append(list(records))
    book = place.ledger.book(place.thread, QUESTION_ID)
    messages = [HumanMessage(REFUND_GOAL, id=QUESTION_ID), *earlier]
    return gatekeeper(Step(run=QUESTION_ID), messages, book=book, place=place, deps=parts,
                      config=config)  # fmt: skip


def _only(keeper: Gatekeeper) -> Record:
    (record,) = keeper.records
    return record


def test_a_call_let_through_leaves_a_permit_naming_exactly_it() -> None:
    parts = deps()
    keeper = _keeper(parts)
    admitted = keeper.admit(BILLING)
    assert isinstance(admitted, Call)
    assert admitted.key
    assert admitted.model_copy(update={"key": ""}) == BILLING
    permit = _only(keeper)
    assert (permit.kind, permit.key, permit.thread, permit.run) == (
        Kind.PERMIT, admitted.key, "t1", QUESTION_ID,
    )  # fmt: skip
    assert permit.body == {
        "call": "c1", "tool": "get_user_billing", "args": canonical_json({"user_id": 42}),
        "args_hash": args_hash({"user_id": 42}), "policy": parts.context.policy_hash,
        "rule": "allow", "step": 0,
    }  # fmt: skip
    assert (keeper.usage.tool_calls, keeper.usage.per_tool) == (1, {"get_user_billing": 1})


@pytest.mark.parametrize(
    ("tool", "fields", "reason"),
    [
        ("delete_everything", {}, "tool_missing:delete_everything"),
        ("get_user_billing", {"allow": frozenset({"get_user_profile"})},
         "tool_denied:get_user_billing"),
    ],
)  # fmt: skip
def test_a_tool_outside_the_allowlist_stops_the_run_or_is_shown_refused(
    tool: str, fields: dict[str, Any], reason: str
) -> None:
    call = BILLING.model_copy(update={"tool": tool})
    stopping = _keeper(deps(**fields))
    stopped = stopping.admit(call)
    assert isinstance(stopped, Stop)
    assert str(stopped) == reason
    assert stopping.records == []
    observing = _keeper(deps(on_tool_error="observe", **fields))
    shown = observing.admit(call)
    assert isinstance(shown, Call)
    assert shown.shown is not None
    assert shown.shown.error == reason
    assert "Tools you may call: [" in shown.shown.text
    refused = _only(observing)
    assert (refused.kind, refused.body["error"]) == (Kind.REFUSED, reason)
    assert observing.usage.tool_calls == 1  # a refusal shown to the model counts as a call


def test_budgets_count_from_the_record_and_a_counted_call_is_not_counted_again() -> None:
    search = Call(id="c0", tool="search_policy", args={"query": "refund"})
    body = {"call": "c0", "tool": "search_policy", "args_hash": args_hash(search.args)}
    counted = Record("t1", QUESTION_ID, Kind.PERMIT, "k0", body)
    keeper = _keeper(deps(max_tool_calls=1), records=[counted])
    assert keeper.usage.tool_calls == 1  # from the record: the state holds no count
    over = keeper.admit(BILLING)
    assert isinstance(over, Stop)
    assert over.reason is StopReason.MAX_TOOL_CALLS
    assert over.message == "max_tool_calls 1 reached (2 requested)"
    again = keeper.admit(search)
    assert isinstance(again, Call)  # the call the record counts: admitted again, not counted
    assert keeper.usage.tool_calls == 1
    forged = search.model_copy(update={"args": {"query": "everything"}})  # under its id
    assert isinstance(keeper.admit(forged), Stop)  # another call: counted, over the budget
    capped = _keeper(deps(tool_limits={"get_user_billing": 1}))
    assert isinstance(capped.admit(BILLING), Call)
    second = capped.admit(BILLING.model_copy(update={"id": "c2", "args": {"user_id": 7}}))
    assert isinstance(second, Stop)
    assert str(second) == "tool_limit:get_user_billing"


def test_a_repeat_is_reminded_then_a_loop_stops_the_run() -> None:
    earlier = _ran("get_user_billing", "c0", user_id=42)
    keeper = _keeper(deps(repeat_reminders=1), earlier)
    reminded = keeper.admit(BILLING)
    assert isinstance(reminded, Call)
    assert reminded.shown is not None
    assert reminded.shown.error == "loop_detected"
    assert "You already called get_user_billing" in reminded.shown.text
    assert _only(keeper).kind is Kind.REFUSED
    looped = keeper.admit(BILLING.model_copy(update={"id": "c2"}))
    assert isinstance(looped, Stop)
    assert looped.reason is StopReason.LOOP_DETECTED
    assert isinstance(_keeper(deps(), earlier).admit(BILLING), Stop)  # no reminders: a stop
    other = _keeper(deps(), earlier).admit(BILLING.model_copy(update={"args": {"user_id": 7}}))
    assert isinstance(other, Call)
    assert other.shown is None


def test_the_same_call_has_the_same_key_wherever_it_is_replayed() -> None:
    """Thread, run, tool, arguments and how many times the run asked for it before: a fork or a
    replay of the step gets the key of the call it repeats; asked for again after it ran (a
    new occurrence), another. Under normalized loop detection 5 and 5.0 are one call."""
    first, replayed = _keeper(deps()), _keeper(deps())
    assert first.key_for(BILLING) == replayed.key_for(BILLING.model_copy(update={"id": "c9"}))
    after = _keeper(deps(), _ran("get_user_billing", "c0", user_id=42))
    assert after.key_for(BILLING) != first.key_for(BILLING)
    assert first.key_for(BILLING) != first.key_for(
        BILLING.model_copy(update={"args": {"user_id": 7}})
    )
    spelled = BILLING.model_copy(update={"args": {"user_id": 42.0}})
    assert _keeper(deps()).key_for(spelled) != first.key_for(BILLING)
    normalized = deps(loop_detection="normalized")
    assert _keeper(normalized).key_for(spelled) == _keeper(normalized).key_for(BILLING)


def test_the_same_call_twice_in_one_reply_has_two_keys() -> None:
    """With loop detection off, a reply may ask for one call twice (two payments): each is a
    call of its own, run once each."""
    keeper = _keeper(deps(loop_detection="off", max_parallel_calls=2))
    first = keeper.admit(BILLING)
    second = keeper.admit(BILLING.model_copy(update={"id": "c2"}))
    assert isinstance(first, Call)
    assert isinstance(second, Call)
    assert first.key != second.key
    assert [r.key for r in keeper.records] == [first.key, second.key]


class Human:
    """Answers the gate's question as a person would, and keeps what was asked."""

    def __init__(self, decision: Decision) -> None:
        self.decision, self.asked = decision, []

    def __call__(self, question: dict[str, Any], check: Any = None) -> Decision:
        self.asked.append(question)
        return self.decision


APPROVAL = {"require_approval": frozenset({"get_user_billing"})}


def _asked(monkeypatch: pytest.MonkeyPatch, decision: Decision, **fields: Any) -> tuple[Any, Any]:
    human = Human(decision)
    monkeypatch.setattr(admitting, "ask", human)
    keeper = _keeper(deps(**APPROVAL, **fields))
    return keeper, keeper.admit(BILLING)


def test_an_approved_call_has_a_permit_naming_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    keeper, admitted = _asked(monkeypatch, Decision(approved=True))
    assert isinstance(admitted, Call)
    permit = _only(keeper)
    assert permit.body["rule"] == "approval"
    assert permit.body["answer"]["decision"] == "approve"
    assert "approve every get_user_billing call" in permit.body["answer"]["question"]


def test_an_edited_call_has_a_permit_for_the_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    keeper, admitted = _asked(monkeypatch, Decision(approved=True, args={"user_id": 7}))
    assert isinstance(admitted, Call)
    assert (admitted.args, admitted.proposed) == ({"user_id": 7}, {"user_id": 42})
    permit = dataclasses.replace(_only(keeper), verified=True)  # as the ledger reads it back
    assert permit.body["args"] == canonical_json({"user_id": 7})
    assert permit.body["answer"]["decision"] == "edit"
    assert permitted(permit, admitted, keeper.deps)
    assert not permitted(permit, admitted.model_copy(update={"args": {"user_id": 42}}), keeper.deps)


def test_a_human_answering_for_the_tool_leaves_a_refused_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keeper, admitted = _asked(monkeypatch, Decision(approved=False, response="Billing: USD 49"))
    assert isinstance(admitted, Call)
    assert admitted.shown is not None
    assert (admitted.shown.text, admitted.shown.by_human) == ("Billing: USD 49", True)
    assert (_only(keeper).kind, _only(keeper).body["by_human"]) == (Kind.REFUSED, True)


def test_a_rejection_stops_the_run_or_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    keeper, stopped = _asked(monkeypatch, Decision(approved=False, reason="wrong user"))
    assert isinstance(stopped, Stop)
    assert str(stopped) == "tool_rejected:get_user_billing"
    assert stopped.message == "a human rejected get_user_billing: wrong user"
    assert keeper.records == []
    keeper, shown = _asked(monkeypatch, Decision(approved=False, reason="wrong user"),
                           on_reject="observe")  # fmt: skip
    assert isinstance(shown, Call)
    assert shown.shown is not None
    assert (
        "rejected the tool call for `get_user_billing` with reason: wrong user" in shown.shown.text
    )
    assert _only(keeper).kind is Kind.REFUSED


def test_approval_without_a_checkpointer_stops_and_asks_no_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    human = Human(Decision(approved=True))
    monkeypatch.setattr(admitting, "ask", human)
    stopped = _keeper(deps(**APPROVAL), saved=False).admit(BILLING)
    assert isinstance(stopped, Stop)
    assert str(stopped) == "approval_unavailable:get_user_billing"
    assert human.asked == []
    left = _keeper(deps(**APPROVAL)).admit(BILLING, ask_here=False)  # asked later, or not
    assert isinstance(left, Call)
    assert human.asked == []


@pytest.mark.parametrize(
    ("change", "call"),
    [
        ({}, {}),
        ({"verified": False}, {}),
        ({"kind": Kind.REFUSED}, {}),
        ({}, {"id": "c2"}),
        ({}, {"tool": "get_user_profile"}),
        ({}, {"args": {"user_id": 7}}),
        ({}, {"args": {"user_id": 42, "extra": 1}}),
        ({}, {"key": "another-key"}),
    ],
    ids=["valid", "unverified", "not-a-permit", "call-id", "tool", "args", "more-args", "key"],
)
def test_a_permit_holds_for_exactly_its_call(change: dict[str, Any], call: dict[str, Any]) -> None:
    parts = deps()
    keeper = _keeper(parts)
    admitted = keeper.admit(BILLING)
    assert isinstance(admitted, Call)
    permit = dataclasses.replace(_only(keeper), **{"verified": True, **change})
    assert permitted(permit, admitted.model_copy(update=call), parts) is (not change and not call)


def test_a_permit_holds_only_under_the_policy_that_wrote_it() -> None:
    keeper = _keeper(deps())
    admitted = keeper.admit(BILLING)
    assert isinstance(admitted, Call)
    permit = dataclasses.replace(_only(keeper), verified=True)
    assert permitted(permit, admitted, deps())
    assert not permitted(permit, admitted, deps(max_tool_calls=3))
    assert not permitted(None, admitted, deps())
