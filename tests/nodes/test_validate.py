"""validate on hand-built state: the contract, and the retry rules for malformed replies."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gated_react._engine.chat import call_id
from gated_react.nodes.validate import validate

from ..support.helpers import deps, state


def test_valid_json_action_is_recorded() -> None:
    reply = {"text": '{"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}}'}
    update = validate(state(reply=reply), deps=deps(protocol="json"))
    called = update["action"]
    assert called == {"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}} | {
        "id": call_id(update["messages"][0].id, 0)
    }
    retried = validate(
        state(reply=reply, retry={"why": "bad_json", "message": "m", "count": 1}),
        deps=deps(protocol="json"),
    )
    assert retried["retry"] is None  # a valid reply ends the reminders


def test_invalid_reply_stops_by_default() -> None:
    update = validate(state(reply={"text": '{"kind": "maybe"}'}), deps=deps(protocol="json"))
    assert update["stop_reason"] == "invalid_action:bad_kind"
    assert "bad_kind" in update["message"]


def test_retry_mode_gives_reminders_then_stops() -> None:
    parts = deps(protocol="text", on_invalid_action="retry", max_invalid_retries=2)
    first = validate(state(reply={"text": "hmm"}), deps=parts)
    assert first["retry"]["why"] == "no_action"
    assert first["retry"]["count"] == 1
    assert "stop_reason" not in first
    third = validate(
        state(reply={"text": "hmm"}, retry={"why": "no_action", "message": "m", "count": 2}),
        deps=parts,
    )
    assert third["stop_reason"] == "invalid_action:no_action"


def test_a_retry_never_exceeds_max_steps() -> None:
    parts = deps(protocol="text", on_invalid_action="retry", max_steps=3)
    update = validate(state(reply={"text": "hmm"}, usage={"steps": 3}), deps=parts)
    assert update["stop_reason"] == "max_steps"


class Refund(BaseModel):
    """The structured answer the refund tests ask for."""

    model_config = ConfigDict(extra="forbid")
    eligible: bool
    amount_usd: float


def test_an_answer_fitting_the_schema_is_stored_as_its_canonical_json() -> None:
    parts = deps(answer_schema=Refund)
    reply = {"text": '```json\n{"amount_usd": 49, "eligible": true}\n```'}
    update = validate(state(reply=reply), deps=parts)
    assert update["action"] == {"kind": "final", "answer": '{"eligible":true,"amount_usd":49.0}'}
    assert "retry" not in update  # nothing to clear: no reminder was pending


def test_an_answer_missing_the_schema_gets_one_reminder_with_the_error() -> None:
    parts = deps(answer_schema=Refund)  # on_invalid_action="stop" (the default)
    first = validate(state(reply={"text": '{"eligible": true}'}), deps=parts)
    assert "stop_reason" not in first
    assert first["retry"] == {
        "why": "answer_schema",
        "message": "the answer does not fit Refund: amount_usd: Field required",
        "count": 1,
    }
    second = validate(
        state(reply={"text": "Yes, USD 49."}, retry=first["retry"], usage={"steps": 2}),
        deps=parts,
    )
    assert second["stop_reason"] == "invalid_action:answer_schema"
    assert "must be one JSON object fitting Refund: not valid JSON" in second["message"]


def test_retry_mode_may_give_a_schema_miss_more_reminders() -> None:
    parts = deps(answer_schema=Refund, on_invalid_action="retry", max_invalid_retries=2)
    missed = {"why": "answer_schema", "message": "m", "count": 1}
    update = validate(state(reply={"text": "[]"}, retry=missed), deps=parts)
    assert update["retry"]["count"] == 2
    assert "Input should be a valid dictionary" in update["retry"]["message"]


def test_the_schema_leaves_tool_calls_and_other_violations_alone() -> None:
    parts = deps(answer_schema=Refund, protocol="json")
    call = '{"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}}'
    assert validate(state(reply={"text": call}), deps=parts)["action"]["kind"] == "tool"
    broken = validate(state(reply={"text": '{"kind": "final"}'}), deps=parts)
    assert broken["stop_reason"] == "invalid_action:missing_answer"


def test_no_reply_stops_with_a_reason_instead_of_crashing() -> None:
    update = validate(state(reply=None), deps=deps(protocol="json"))
    assert update == {
        "stop_reason": "invalid_action:bad_json",
        "message": "invalid action (bad_json): there is no model reply to validate",
        "action": None,
    }


def test_no_reply_in_retry_mode_asks_again() -> None:
    parts = deps(on_invalid_action="retry", max_invalid_retries=1)
    update = validate(state(reply=None), deps=parts)
    assert update == {
        "retry": {"why": "bad_json", "message": "there is no model reply to validate", "count": 1},
        "action": None,
    }


def test_retries_are_only_given_in_retry_mode() -> None:
    parts = deps(protocol="text", on_invalid_action="stop", max_invalid_retries=3)
    update = validate(state(reply={"text": "hmm"}), deps=parts)
    assert update["stop_reason"] == "invalid_action:no_action"
    assert update["action"] is None
    assert "retry" not in update


def test_a_reminder_counts_on_from_the_streak() -> None:
    parts = deps(protocol="text", on_invalid_action="retry", max_invalid_retries=3)
    streak = {"why": "no_action", "message": "m", "count": 1}
    update = validate(state(reply={"text": "hmm"}, retry=streak), deps=parts)
    assert update["retry"]["count"] == 2
    assert update["action"] is None


def test_a_retry_at_the_step_limit_stops_and_clears_the_action() -> None:
    parts = deps(protocol="text", on_invalid_action="retry", max_steps=3)
    assert validate(state(reply={"text": "hmm"}, usage={"steps": 2}), deps=parts)["retry"]
    update = validate(state(reply={"text": "hmm"}, usage={"steps": 3}), deps=parts)
    assert update == {
        "stop_reason": "max_steps",
        "message": "max_steps 3 reached (4 requested)",
        "action": None,
    }


def test_a_schema_miss_gets_one_reminder_even_with_no_retries() -> None:
    parts = deps(answer_schema=Refund, on_invalid_action="retry", max_invalid_retries=0)
    first = validate(state(reply={"text": "Yes"}), deps=parts)
    assert first["retry"]["count"] == 1
    second = validate(state(reply={"text": "Yes"}, retry=first["retry"]), deps=parts)
    assert second["stop_reason"] == "invalid_action:answer_schema"


def test_the_protocol_reads_the_reply_against_the_registered_tools() -> None:
    update = validate(
        state(reply={"text": "Action: get_user_profile[42]"}), deps=deps(protocol="text")
    )
    assert update["action"] | {"id": None} == {
        "kind": "tool",
        "name": "get_user_profile",
        "args": {"user_id": 42},
        "id": None,
    }


def test_every_call_of_a_batch_is_held_to_the_contract() -> None:
    calls = [{"name": "get_user_profile", "args": {"user_id": 42}}, {"name": " ", "args": {}}]
    reply = {"text": "", "tool_calls": calls}
    update = validate(state(reply=reply), deps=deps(max_parallel_calls=2))
    assert update["stop_reason"] == "invalid_action:missing_tool_name"
    good = {"text": "", "tool_calls": [calls[0], {"name": "search_policy", "args": {"query": "x"}}]}
    assert validate(state(reply=good), deps=deps(max_parallel_calls=3))["action"]["kind"] == "tools"


def test_tool_calls_go_into_the_conversation_before_the_gate_under_their_ids() -> None:
    """The AI message of the step holds every call, with the text the model wrote with them
    and the model's own ids (made up, stable, where it gave none): a call the gate pauses on
    is the last message, so a chat client draws its approval panel in any turn."""
    reply = {
        "id": "reply-1",
        "text": "Let me look that up.",
        "tool_calls": [
            {"name": "get_user_profile", "args": {"user_id": 42}, "id": "call_abc"},
            {"name": "get_user_billing", "args": {"user_id": 42}, "id": None},
        ],
    }
    update = validate(state(reply=reply), deps=deps(max_parallel_calls=2))
    (message,) = update["messages"]
    assert (message.type, message.id, message.text) == ("ai", "reply-1", "Let me look that up.")
    ids = [c["id"] for c in message.tool_calls]
    assert ids == ["call_abc", call_id("reply-1", 1)]
    assert [c["id"] for c in update["action"]["calls"]] == ids
    assert len(ids[1]) <= 40  # OpenAI's limit on a tool call id


def test_a_json_reply_is_a_call_with_no_protocol_text_in_the_conversation() -> None:
    reply = {
        "id": "r",
        "text": '{"kind": "tool", "name": "get_user_profile", "args": {"user_id": 1}}',
    }
    (message,) = validate(state(reply=reply), deps=deps(protocol="json"))["messages"]
    assert message.text == ""
    assert message.tool_calls[0]["id"] == call_id("r", 0)
