"""gate's approval step on hand-built state, with the human's answer stubbed in for ``ask``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gated_react._engine.approval import Decision
from gated_react._engine.call_keys import args_hash, idempotency_key
from gated_react._engine.deps import NodeDeps
from gated_react.nodes import gate as gate_module
from gated_react.nodes.gate import gate

from ..support.helpers import deps, history_entry, logs, state

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
BILLING = {"kind": "tool", "name": "get_user_billing", "args": {"user_id": 42}}
APPROVAL = deps(require_approval=frozenset({"get_user_billing"}))
Check = Callable[[dict[str, Any]], str | None]
Asked = tuple[dict[str, Any], Check | None]


def _approve(
    monkeypatch: pytest.MonkeyPatch,
    answer: Decision,
    history: list[dict[str, Any]] | None = None,
    parts: NodeDeps = APPROVAL,
) -> tuple[dict[str, Any], list[Asked]]:
    """Gate ``get_user_billing(42)`` under approval in a run that can pause; the update and
    what was asked (the question and the check edited arguments must pass)."""
    asked: list[Asked] = []

    def ask(question: dict[str, Any], check_args: Check | None = None) -> Decision:
        asked.append((question, check_args))
        return answer

    monkeypatch.setattr(gate_module, "ask", ask)
    monkeypatch.setattr(gate_module, "can_pause", lambda config: config is CONFIG)
    current = state(action=BILLING, **logs(history or [], steps=2))
    return gate(current, CONFIG, deps=parts), asked


def test_the_question_names_the_tool_args_step_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    update, asked = _approve(monkeypatch, Decision(approved=True))
    [(question, check)] = asked
    ours = {key: question[key] for key in ("kind", "tool", "args", "step", "why")}
    assert ours == {  # LangChain's HITL keys may stand beside these
        "kind": "approval",
        "tool": "get_user_billing",
        "args": {"user_id": 42},
        "step": 2,
        "why": "policy requires a human to approve every get_user_billing call",
    }
    assert check is not None  # edits are checked against the tool's own schema
    assert check({"user_id": 7}) is None
    assert "get_user_billing" in (check({"user_id": "x"}) or "")
    assert update["calls"][0]["args"] == {"user_id": 42}
    assert update["calls"][0]["key"] == idempotency_key(
        "t1", 2, "get_user_billing", {"user_id": 42}
    )


def test_tools_without_approval_are_never_asked_about(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(gate_module, "ask", lambda *question: asked.append(question))
    profile = {"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}}
    assert "calls" in gate(state(action=profile), CONFIG, deps=APPROVAL)
    assert asked == []


def test_approval_without_a_checkpointer_stops_instead_of_asking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(gate_module, "ask", lambda *question: asked.append(question))
    update = gate(state(action=BILLING), CONFIG, deps=APPROVAL)
    assert update["stop_reason"] == "approval_unavailable:get_user_billing"
    assert update["message"] == (
        "get_user_billing needs a human's approval, but the graph has no checkpointer to pause "
        "on; build it with one (build_graph(..., checkpointer=...)) or serve it with langgraph.json"
    )
    assert update["trace"][0]["stop_reason"] == "approval_unavailable:get_user_billing"
    assert "calls" not in update
    assert asked == []


def test_a_rejection_stops_with_the_reason_or_says_none_was_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    update, _ = _approve(monkeypatch, Decision(approved=False, reason="not today"))
    assert update["stop_reason"] == "tool_rejected:get_user_billing"
    assert update["message"] == "a human rejected get_user_billing: not today"
    assert update["trace"] == [
        {
            "step": 2,
            "tool": "get_user_billing",
            "args_hash": args_hash({"user_id": 42}),
            "ok": False,
            "stop_reason": "tool_rejected:get_user_billing",
        }
    ]
    assert "calls" not in update
    silent, _ = _approve(monkeypatch, Decision(approved=False))
    assert silent["message"] == "a human rejected get_user_billing: no reason given"


def test_edited_args_run_with_their_own_key(monkeypatch: pytest.MonkeyPatch) -> None:
    update, _ = _approve(monkeypatch, Decision(approved=True, args={"user_id": 7}))
    assert update["calls"][0]["args"] == {"user_id": 7}
    assert update["calls"][0]["key"] == idempotency_key("t1", 2, "get_user_billing", {"user_id": 7})


def test_edits_equal_to_the_proposal_are_not_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    history = [history_entry(1, "get_user_billing", user_id=7)]
    same, _ = _approve(monkeypatch, Decision(approved=True, args={"user_id": 42}), history)
    assert same["calls"][0]["args"] == {"user_id": 42}


def test_edited_args_that_repeat_an_earlier_call_are_a_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history = [history_entry(1, "get_user_billing", user_id=7)]
    update, _ = _approve(monkeypatch, Decision(approved=True, args={"user_id": 7}), history)
    assert update["stop_reason"] == "loop_detected"
    assert update["message"] == (
        "get_user_billing was already called with the same arguments in this run"
    )
    assert update["trace"][0]["args_hash"] == args_hash({"user_id": 42})


@pytest.mark.parametrize(("mode", "edit"), [("exact", {"user_id": "7"}), ("off", {"user_id": 7})])
def test_edited_args_follow_the_policys_loop_mode(
    monkeypatch: pytest.MonkeyPatch, mode: str, edit: dict[str, Any]
) -> None:
    history = [history_entry(1, "get_user_billing", user_id=7)]
    parts = deps(require_approval=frozenset({"get_user_billing"}), loop_detection=mode)
    update, _ = _approve(monkeypatch, Decision(approved=True, args=edit), history, parts)
    assert update["calls"][0]["args"] == edit


def test_a_human_may_answer_in_place_of_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    update, _ = _approve(monkeypatch, Decision(approved=False, response="USD 49"))
    assert "stop_reason" not in update
    assert update["calls"] == [
        {
            "step": 2,
            "tool": "get_user_billing",
            "args": {"user_id": 42},
            "key": "",
            "id": None,
            "outcome": {
                "ok": True,
                "observation": "USD 49",
                "error": None,
                "by_human": True,
                "content": None,
                "artifact": None,
            },
        }
    ]
    assert update["usage"]["tool_calls"] == 1  # an answer in place of the tool counts as a call


def test_a_humans_answer_is_bounded_like_any_observation(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = deps(require_approval=frozenset({"get_user_billing"}), max_observation_chars=1000)
    answer = Decision(approved=False, response="y" * 2_000_000)
    update, _ = _approve(monkeypatch, answer, parts=parts)
    seen = update["calls"][0]["outcome"]["observation"]
    assert seen == "y" * 1000 + " ...[cut: 2000000 chars, first 1000 shown]"


def test_the_question_takes_only_the_decisions_the_policy_lists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HumanInTheLoopMiddleware``'s ``allowed_decisions``: before, every question took all
    four, so a reviewer could edit a refund an app allowed only to approve or reject."""
    strict = deps(
        require_approval=frozenset({"get_user_billing"}),
        approval_decisions={"get_user_billing": ("reject", "approve")},
    )
    _, asked = _approve(monkeypatch, Decision(approved=True), parts=strict)
    [(question, _)] = asked
    assert question["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
    _, asked = _approve(monkeypatch, Decision(approved=True))
    assert asked[0][0]["review_configs"][0]["allowed_decisions"] == [
        "approve",
        "edit",
        "reject",
        "respond",
    ]
