"""validate on hand-built state: the contract, and the retry rules for malformed replies."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from gated_react._engine.conversation.chat import call_id
from gated_react.nodes.validate import validate
from gated_react.testing import ScriptedChatModel

from ..support.helpers import deps, state


def _step(update: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = update["step"]
    return found


def test_valid_json_action_is_the_steps_call() -> None:
    reply = {
        "id": "r",
        "text": '{"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}}',
    }
    update = validate(state(reply=reply), deps=deps(protocol="json"))
    assert _step(update)["calls"] == [
        {"id": call_id("r", 0), "tool": "get_user_profile", "args": {"user_id": 42}, "key": ""}
    ]
    retried = validate(
        state(reply=reply, retry={"why": "bad_json", "message": "m", "count": 1}),
        deps=deps(protocol="json"),
    )
    assert "retry" not in _step(retried)  # a valid reply ends the reminders


def test_a_reply_that_became_calls_is_not_carried_on() -> None:
    """Its calls are in the conversation (decide wrote them) and in the step: the nodes after
    validate would each store the reply again for nothing."""
    reply = {"id": "r", "text": '{"kind": "tool", "name": "get_user_profile", "args": {}}'}
    assert "reply" not in _step(validate(state(reply=reply), deps=deps(protocol="json")))
    final = {"id": "r", "text": '{"kind": "final", "answer": "done"}'}
    assert _step(validate(state(reply=final), deps=deps(protocol="json")))["reply"]["id"] == "r"


def test_invalid_reply_stops_by_default() -> None:
    update = validate(state(reply={"text": '{"kind": "maybe"}'}), deps=deps(protocol="json"))
    assert _step(update)["ending"]["reason"] == "invalid_action:bad_kind"
    assert "bad_kind" in _step(update)["ending"]["message"]


def test_retry_mode_gives_reminders_then_stops() -> None:
    parts = deps(protocol="text", on_invalid_action="retry", max_invalid_retries=2)
    first = _step(validate(state(reply={"text": "hmm"}), deps=parts))
    assert (first["retry"]["why"], first["retry"]["count"]) == ("no_action", 1)
    assert "ending" not in first
    third = validate(
        state(reply={"text": "hmm"}, retry={"why": "no_action", "message": "m", "count": 2}),
        deps=parts,
    )
    assert _step(third)["ending"]["reason"] == "invalid_action:no_action"


def test_a_retry_never_exceeds_max_steps() -> None:
    """The budgets are decide's to check, before each model call: a retried reply is one."""
    model = ScriptedChatModel(replies=["hmm"], cycle=True)
    from gated_react import Policy, build_graph, result_of

    policy = Policy(protocol="text", on_invalid_action="retry", max_invalid_retries=10)
    graph = build_graph(model, [], policy=policy.replace(max_steps=3))
    out = result_of(graph, graph.invoke({"goal": "hi"}))
    assert out["stop_reason"] == "max_steps"
    assert out["message"] == "max_steps 3 reached (4 requested)"
    assert len(model.requests) == out["usage"]["steps"] == 3


class Refund(BaseModel):
    """The structured answer the refund tests ask for."""

    model_config = ConfigDict(extra="forbid")
    eligible: bool
    amount_usd: float


def test_an_answer_fitting_the_schema_is_stored_as_its_canonical_json() -> None:
    parts = deps(answer_schema=Refund)
    reply = {"text": '```json\n{"amount_usd": 49, "eligible": true}\n```'}
    update = validate(state(reply=reply), deps=parts)
    assert _step(update)["answer"] == {
        "text": '{"eligible":true,"amount_usd":49.0}',
        "data": {"eligible": True, "amount_usd": 49.0},
        "direct": False,
    }
    assert "retry" not in _step(update)  # nothing to clear: no reminder was pending


def test_an_answer_missing_the_schema_gets_one_reminder_with_the_error() -> None:
    parts = deps(answer_schema=Refund)  # on_invalid_action="stop" (the default)
    first = _step(validate(state(reply={"text": '{"eligible": true}'}), deps=parts))
    assert "ending" not in first
    assert first["retry"] == {
        "why": "answer_schema",
        "message": "the answer does not fit Refund: amount_usd: Field required",
        "count": 1,
    }
    second = _step(
        validate(state(reply={"text": "Yes, USD 49."}, retry=first["retry"]), deps=parts)
    )
    assert second["ending"]["reason"] == "invalid_action:answer_schema"
    assert "must be one JSON object fitting Refund: not valid JSON" in second["ending"]["message"]


def test_retry_mode_may_give_a_schema_miss_more_reminders() -> None:
    parts = deps(answer_schema=Refund, on_invalid_action="retry", max_invalid_retries=2)
    missed = {"why": "answer_schema", "message": "m", "count": 1}
    update = _step(validate(state(reply={"text": "[]"}, retry=missed), deps=parts))
    assert update["retry"]["count"] == 2
    assert "Input should be a valid dictionary" in update["retry"]["message"]


def test_the_schema_leaves_tool_calls_and_other_violations_alone() -> None:
    parts = deps(answer_schema=Refund, protocol="json")
    called = '{"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}}'
    assert _step(validate(state(reply={"text": called}), deps=parts))["calls"][0]["tool"] == (
        "get_user_profile"
    )
    broken = _step(validate(state(reply={"text": '{"kind": "final"}'}), deps=parts))
    assert broken["ending"]["reason"] == "invalid_action:missing_answer"


def test_no_reply_stops_with_a_reason_instead_of_crashing() -> None:
    update = validate(state(reply=None), deps=deps(protocol="json"))
    assert update == {
        "step": {
            "run": "q-1",
            "calls": [],
            "ending": {
                "reason": "invalid_action:bad_json",
                "message": "invalid action (bad_json): there is no model reply to validate",
            },
        }
    }


def test_no_reply_in_retry_mode_asks_again() -> None:
    parts = deps(on_invalid_action="retry", max_invalid_retries=1)
    update = validate(state(reply=None), deps=parts)
    assert _step(update)["retry"] == {
        "why": "bad_json",
        "message": "there is no model reply to validate",
        "count": 1,
    }
    assert "ending" not in _step(update)


def test_retries_are_only_given_in_retry_mode() -> None:
    parts = deps(protocol="text", on_invalid_action="stop", max_invalid_retries=3)
    update = _step(validate(state(reply={"text": "hmm"}), deps=parts))
    assert update["ending"]["reason"] == "invalid_action:no_action"
    assert "retry" not in update


def test_a_reminder_counts_on_from_the_streak() -> None:
    parts = deps(protocol="text", on_invalid_action="retry", max_invalid_retries=3)
    streak = {"why": "no_action", "message": "m", "count": 1}
    update = _step(validate(state(reply={"text": "hmm"}, retry=streak), deps=parts))
    assert update["retry"]["count"] == 2
    assert update["calls"] == []


def test_a_schema_miss_gets_one_reminder_even_with_no_retries() -> None:
    parts = deps(answer_schema=Refund, on_invalid_action="retry", max_invalid_retries=0)
    first = _step(validate(state(reply={"text": "Yes"}), deps=parts))
    assert first["retry"]["count"] == 1
    second = _step(validate(state(reply={"text": "Yes"}, retry=first["retry"]), deps=parts))
    assert second["ending"]["reason"] == "invalid_action:answer_schema"


def test_the_protocol_reads_the_reply_against_the_registered_tools() -> None:
    update = validate(
        state(reply={"text": "Action: get_user_profile[42]"}), deps=deps(protocol="text")
    )
    ((called),) = _step(update)["calls"]
    assert (called["tool"], called["args"]) == ("get_user_profile", {"user_id": 42})


def test_every_call_of_a_batch_is_held_to_the_contract() -> None:
    calls = [{"name": "get_user_profile", "args": {"user_id": 42}}, {"name": " ", "args": {}}]
    reply = {"text": "", "tool_calls": calls}
    update = _step(validate(state(reply=reply), deps=deps(max_parallel_calls=2)))
    assert update["ending"]["reason"] == "invalid_action:missing_tool_name"
    good = {"text": "", "tool_calls": [calls[0], {"name": "search_policy", "args": {"query": "x"}}]}
    assert len(_step(validate(state(reply=good), deps=deps(max_parallel_calls=3)))["calls"]) == 2


def test_a_rejected_reply_answers_each_call_decide_wrote_as_not_run() -> None:
    """Every call in the conversation keeps its one result: a reply the contract rejects is
    answered, call by call, with why (marked as not run)."""
    calls = [
        {"name": "get_user_profile", "args": {"user_id": 42}, "id": "a"},
        {"name": "get_user_billing", "args": {"user_id": 42}, "id": "b"},
    ]
    reply = {"id": "r", "text": "", "tool_calls": calls}
    parts = deps(on_invalid_action="retry", max_invalid_retries=1)
    update = validate(state(reply=reply), deps=parts)
    answers = update["messages"]
    assert [m.tool_call_id for m in answers] == ["a", "b"]
    assert all(m.status == "error" and m.response_metadata == {"not_run": True} for m in answers)
    assert answers[0].text.startswith("not run (invalid_action:multiple_actions)")
