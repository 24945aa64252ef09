"""Approval in LangChain's human-in-the-loop shape: the question's ``HITLRequest`` keys, the
``{"decisions": [...]}`` answers, and which decisions a question allows (unit level, no graph)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gated_react._engine.authority import approval
from gated_react._engine.authority.approval import Decision, ask, parse_answer, question
from gated_react.policy import APPROVAL_DECISIONS as DECISIONS

QUESTION = question("approval", "t", {"n": 1}, 3, "policy says so", allowed=DECISIONS)


def _ask(
    monkeypatch: pytest.MonkeyPatch, answers: list[Any], asked: dict[str, Any] = QUESTION
) -> tuple[Decision, list[str | None]]:
    """``ask`` answered from ``answers`` in turn; the decision and each question's error."""
    errors: list[str | None] = []

    def ask_human(value: dict[str, Any], same: Any) -> Any:
        errors.append(value["error"])
        return answers[len(errors) - 1]

    monkeypatch.setattr(approval, "ask_human", ask_human)
    return ask(asked), errors


def _one(decision: Any) -> dict[str, Any]:
    return {"decisions": [decision]}


def test_the_question_has_our_keys_and_langchains() -> None:
    asked = question("approval", "refund", {"n": 1}, 2, "why", allowed=("approve", "reject"))
    assert asked == {
        "kind": "approval",
        "tool": "refund",
        "args": {"n": 1},
        "step": 2,
        "why": "why",
        "action_requests": [{"name": "refund", "args": {"n": 1}, "description": "why"}],
        "review_configs": [{"action_name": "refund", "allowed_decisions": ["approve", "reject"]}],
    }


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        ({"type": "approve"}, Decision(approved=True)),
        ({"type": "reject"}, Decision(approved=False)),
        ({"type": "reject", "message": " not now "}, Decision(approved=False, reason="not now")),
        ({"type": "respond", "message": " USD 49 "}, Decision(approved=False, response="USD 49")),
        (
            {"type": "edit", "edited_action": {"name": "t", "args": {"n": 2}}},
            Decision(approved=True, args={"n": 2}, tool="t"),
        ),
        ({"type": "edit", "edited_action": {"args": {"n": 2}}}, Decision(True, {"n": 2})),
        (
            {"type": "edit", "edited_action": {"name": 7, "args": {}}},
            Decision(approved=True, args={}, tool="7"),
        ),
    ],
)
def test_each_decision_type_becomes_a_decision(decision: Any, expected: Decision) -> None:
    assert parse_answer(_one(decision)) == expected


ONE = "expected {'decisions': [one decision]} for the one action asked about"
TYPE = "a decision's 'type' must be one of approve, edit, reject, respond"
EDIT = "an 'edit' decision needs 'edited_action': {'name', 'args': {...}}"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"decisions": []}, ONE),
        ({"decisions": [{"type": "approve"}] * 2}, ONE),
        ({"decisions": {"type": "approve"}}, ONE),
        ({"decisions": [{"type": "approve"}], "approved": True}, ONE),
        (_one("approve"), TYPE),
        (_one({"type": "maybe"}), TYPE),
        (_one({}), TYPE),
        (_one({"type": "reject", "message": 5}), "a decision's 'message' must be a string"),
        (_one({"type": "respond"}), "a 'respond' decision needs a non-blank 'message'"),
        (_one({"type": "respond", "message": "  "}), "a 'respond' decision needs a non-blank"),
        (_one({"type": "edit"}), EDIT),
        (_one({"type": "edit", "edited_action": {"name": "t"}}), EDIT),
        (_one({"type": "edit", "edited_action": {"name": "t", "args": [1]}}), EDIT),
        (_one({"type": "edit", "edited_action": "t"}), EDIT),
    ],
)
def test_malformed_decisions_are_refused_with_the_reason(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        parse_answer(value)


def test_ask_takes_a_decision_the_question_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    decision, errors = _ask(monkeypatch, [_one({"type": "respond", "message": "42"})])
    assert decision == Decision(approved=False, response="42")
    assert errors == [None]


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (_one({"type": "respond", "message": "42"}), "respond"),
        ({"approved": True, "args": {"n": 2}}, "edit"),
        (_one({"type": "edit", "edited_action": {"name": "t", "args": {"n": 2}}}), "edit"),
    ],
)
def test_ask_refuses_a_decision_the_question_does_not_allow(
    monkeypatch: pytest.MonkeyPatch, answer: Any, kind: str
) -> None:
    narrow = question("approval", "t", {"n": 1}, 3, "why", allowed=("approve", "reject"))
    decision, errors = _ask(monkeypatch, [answer, {"approved": True}], narrow)
    assert decision == Decision(approved=True)
    assert errors == [None, f"a {kind!r} decision is not allowed here; allowed: approve, reject"]


def test_ask_refuses_an_edit_of_another_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    other = _one({"type": "edit", "edited_action": {"name": "x" * 80, "args": {"n": 2}}})
    same = _one({"type": "edit", "edited_action": {"name": "t", "args": {"n": 2}}})
    decision, errors = _ask(monkeypatch, [other, same])
    assert decision == Decision(approved=True, args={"n": 2}, tool="t")
    assert errors == [
        None,
        f"an edit cannot change the tool: the gate asked about t, not {'x' * 60}; "
        "edit its arguments, or reject it",
    ]


def test_a_question_offers_the_example_answers_of_the_decisions_it_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Shown an example of a decision it then refuses, a reviewer (or a UI built from the
    question) is led into the refusal: only the allowed ones are offered, asked again too."""
    offered: list[list[str]] = []

    def ask_human(value: dict[str, Any], same: Any) -> Any:
        offered.append(list(value["answers"]))
        return _one({"type": "respond", "message": "42"}) if len(offered) == 1 else {
            "approved": True
        }  # fmt: skip

    monkeypatch.setattr(approval, "ask_human", ask_human)
    narrow = question("approval", "t", {"n": 1}, 3, "why", allowed=("approve", "reject"))
    assert ask(narrow) == Decision(approved=True)
    assert offered == [["approve", "reject"], ["approve", "reject"]]
    assert list(approval.offered(QUESTION)) == [
        "approve", "approve_with_edits", "reject", "respond"
    ]  # fmt: skip


def test_a_bare_decision_is_taken_and_one_mixed_with_our_keys_is_not() -> None:
    """LangChain's ``per_call`` answer is one decision alone; an answer that mixes its keys
    with ours (``approved: false`` beside ``type: approve``) means nothing for sure: refused."""
    assert parse_answer({"type": "approve"}) == Decision(approved=True)
    assert parse_answer({"type": "reject", "message": " no "}) == Decision(False, reason="no")
    with pytest.raises(ValueError, match="unknown keys"):
        parse_answer({"type": "approve", "approved": False})
