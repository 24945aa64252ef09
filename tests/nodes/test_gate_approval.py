"""gate's approval step on hand-built state, with the human's answer stubbed in for ``ask``: the
permit it writes names the answer that admitted the call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gated_react._engine.authority import admit
from gated_react._engine.authority.approval import Decision
from gated_react._engine.deps import NodeDeps
from gated_react.nodes.gate import gate

from ..support.helpers import deps, state
from .hand import applied, ending, kinds, paid_steps, proposal, records, saved, step_messages, usage

BILLING = ("get_user_billing", {"user_id": 42})
APPROVAL = deps(require_approval=frozenset({"get_user_billing"}))
Check = Callable[[dict[str, Any]], str | None]
Asked = tuple[dict[str, Any], Check | None]


def _approve(
    monkeypatch: pytest.MonkeyPatch,
    answer: Decision,
    before: tuple[tuple[str, dict[str, Any]], ...] = (),
    parts: NodeDeps = APPROVAL,
) -> tuple[dict[str, Any], list[Asked], Any]:
    """Gate ``get_user_billing(42)`` under approval, at step 2 of a run that can pause, after
    the calls ``before``: the state after, what was asked (the question and the check edited
    arguments must pass) and the config (its record)."""
    asked: list[Asked] = []

    def ask(question: dict[str, Any], check_args: Check | None = None) -> Decision:
        asked.append((question, check_args))
        return answer

    monkeypatch.setattr(admit, "ask", ask)
    config = saved()
    paid_steps(config, 2)
    earlier = [m for i, call in enumerate(before) for m in step_messages(*call, call=f"e{i}")]
    proposed = proposal(BILLING)
    current = state(messages=[*earlier, proposed["message"]], calls=proposed["calls"])
    return applied(current, gate(current, config, deps=parts)), asked, config


def test_the_question_names_the_tool_args_step_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    after, asked, config = _approve(monkeypatch, Decision(approved=True))
    [(question, check)] = asked
    ours = {key: question[key] for key in ("kind", "tool", "args", "step", "why")}
    assert ours == {  # LangChain's HITL keys may stand beside these
        "kind": "approval",
        "tool": "get_user_billing",
        "args": {"user_id": 42},
        "step": 1,  # the step on this branch: stable wherever the branch is replayed
        "why": "policy requires a human to approve every get_user_billing call",
    }
    assert check is not None  # edits are checked against the tool's own schema
    assert check({"user_id": 7}) is None
    assert "get_user_billing" in (check({"user_id": "x"}) or "")
    (call,) = after["step"]["calls"]
    assert call["args"] == {"user_id": 42}
    (permit,) = [r for r in records(config) if r.kind == "permit"]
    assert (permit.key, permit.body["rule"], permit.body["step"]) == (call["key"], "approval", 1)
    assert permit.body["answer"] == {"decision": "approve", "question": question["why"]}


def test_tools_without_approval_are_never_asked_about(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(admit, "ask", lambda *question: asked.append(question))
    profile = proposal(("get_user_profile", {"user_id": 42}))
    current = state(messages=[profile["message"]], calls=profile["calls"])
    assert gate(current, saved(), deps=APPROVAL)["step"]["calls"][0]["key"]
    assert asked == []


def test_approval_without_a_checkpointer_stops_instead_of_asking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(admit, "ask", lambda *question: asked.append(question))
    proposed = proposal(BILLING)
    unsaved = state(messages=[proposed["message"]], calls=proposed["calls"], run="q-1#n")
    after = applied(unsaved, gate(unsaved, {}, deps=APPROVAL))
    assert ending(after) == {
        "reason": "approval_unavailable:get_user_billing",
        "message": "get_user_billing needs a human's approval, but the graph has no checkpointer "
        "to pause on; build it with one (build_graph(..., checkpointer=...)) or serve it with "
        "langgraph.json",
        "call": "c1",
        "step": 1,
    }
    assert asked == []


def test_a_rejection_stops_with_the_reason_or_says_none_was_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    after, _, config = _approve(monkeypatch, Decision(approved=False, reason="not today"))
    assert ending(after) == {
        "reason": "tool_rejected:get_user_billing",
        "message": "a human rejected get_user_billing: not today",
        "call": "c1",
        "step": 1,
    }
    assert "permit" not in kinds(config)
    silent, _, _ = _approve(monkeypatch, Decision(approved=False))
    assert ending(silent)["message"] == "a human rejected get_user_billing: no reason given"


def test_edited_args_run_with_their_own_key_under_a_permit_for_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    after, _, config = _approve(monkeypatch, Decision(approved=True, args={"user_id": 7}))
    unedited, _, _ = _approve(monkeypatch, Decision(approved=True))
    (call,) = after["step"]["calls"]
    assert (call["args"], call["proposed"]) == ({"user_id": 7}, {"user_id": 42})
    assert call["key"] != unedited["step"]["calls"][0]["key"]
    (permit,) = [r for r in records(config) if r.kind == "permit"]
    assert (permit.key, permit.body["args"]) == (call["key"], '{"user_id":7}')
    assert permit.body["answer"]["decision"] == "edit"


def test_edits_equal_to_the_proposal_are_not_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    before = (("get_user_billing", {"user_id": 7}),)
    same, _, _ = _approve(monkeypatch, Decision(approved=True, args={"user_id": 42}), before)
    assert same["step"]["calls"][0]["args"] == {"user_id": 42}
    assert "proposed" not in same["step"]["calls"][0]


def test_edited_args_that_repeat_an_earlier_call_are_a_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = (("get_user_billing", {"user_id": 7}),)
    after, _, config = _approve(monkeypatch, Decision(approved=True, args={"user_id": 7}), before)
    assert ending(after)["reason"] == "loop_detected"
    assert ending(after)["message"] == (
        "get_user_billing was already called with the same arguments in this run"
    )
    assert "permit" not in kinds(config)


@pytest.mark.parametrize(("mode", "edit"), [("exact", {"user_id": "7"}), ("off", {"user_id": 7})])
def test_edited_args_follow_the_policys_loop_mode(
    monkeypatch: pytest.MonkeyPatch, mode: str, edit: dict[str, Any]
) -> None:
    before = (("get_user_billing", {"user_id": 7}),)
    parts = deps(require_approval=frozenset({"get_user_billing"}), loop_detection=mode)
    after, _, _ = _approve(monkeypatch, Decision(approved=True, args=edit), before, parts)
    assert after["step"]["calls"][0]["args"] == edit


def test_a_human_may_answer_in_place_of_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    after, _, config = _approve(monkeypatch, Decision(approved=False, response="USD 49"))
    assert ending(after) is None
    (call,) = after["step"]["calls"]
    assert call["shown"] == {"text": "USD 49", "by_human": True}
    asked, refused = records(config)[2:]
    assert asked.kind == "asked"  # the record of the question, then of its answer
    assert (refused.kind, refused.body["by_human"]) == ("refused", True)  # no permit: it won't run
    assert usage(config).tool_calls == 1  # an answer in place of the tool counts as a call


def test_a_humans_answer_is_bounded_like_any_observation(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = deps(require_approval=frozenset({"get_user_billing"}), max_observation_chars=1000)
    answer = Decision(approved=False, response="y" * 2_000_000)
    after, _, _ = _approve(monkeypatch, answer, parts=parts)
    shown = after["step"]["calls"][0]["shown"]["text"]
    assert shown == "y" * 1000 + " ...[cut: 2000000 chars, first 1000 shown]"


def test_the_question_takes_only_the_decisions_the_policy_lists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HumanInTheLoopMiddleware``'s ``allowed_decisions``: before, every question took all
    four, so a reviewer could edit a refund an app allowed only to approve or reject."""
    strict = deps(
        require_approval=frozenset({"get_user_billing"}),
        approval_decisions={"get_user_billing": ("reject", "approve")},
    )
    _, asked, _ = _approve(monkeypatch, Decision(approved=True), parts=strict)
    [(question, _)] = asked
    assert question["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
    _, asked, _ = _approve(monkeypatch, Decision(approved=True))
    assert asked[0][0]["review_configs"][0]["allowed_decisions"] == [
        "approve",
        "edit",
        "reject",
        "respond",
    ]


@pytest.mark.parametrize(
    ("answer", "written"),
    [
        (Decision(approved=True), True),
        (Decision(approved=True, args={"user_id": 7}), True),
        (Decision(approved=False, reason="not today"), False),
        (Decision(approved=False, response="USD 49"), False),
    ],
    ids=["approve", "edit", "reject", "respond"],
)
def test_a_step_a_human_approved_is_written_again_as_create_agent_writes_it(
    monkeypatch: pytest.MonkeyPatch, answer: Decision, written: bool
) -> None:
    """``create_agent``'s ``HumanInTheLoopMiddleware`` writes the reviewed AI message again
    once the human has answered, so a loop printing each ``values`` event's last message
    prints it again on resume (before, the gate wrote nothing and such a loop printed one
    message fewer). Under its own id it replaces itself: the conversation is unchanged, and
    it keeps the model's own arguments, as LangChain's does. Where the human answered in
    place of the tool, that answer is what comes next, as on ``create_agent``."""
    monkeypatch.setattr(admit, "ask", lambda *_: answer)
    parts = deps(require_approval=frozenset({"get_user_billing"}), on_reject="observe")
    proposed = proposal(BILLING)
    current = state(messages=[proposed["message"]], calls=proposed["calls"])
    update = gate(current, saved(), deps=parts)
    assert ("messages" in update) is written
    if written:
        assert update["messages"] == [proposed["message"]]
    after = applied(current, update)
    assert after["messages"] == current["messages"]  # nothing added: the same message
    assert after["messages"][-1].tool_calls[0]["args"] == {"user_id": 42}


def test_a_step_no_human_answered_writes_no_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admit, "ask", lambda *_: pytest.fail("asked"))
    profile = proposal(("get_user_profile", {"user_id": 42}))
    current = state(messages=[profile["message"]], calls=profile["calls"])
    assert set(gate(current, saved(), deps=APPROVAL)) == {"step"}
