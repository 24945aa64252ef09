"""validate on hand-built state: the contract, and the retry rules for malformed replies."""

from __future__ import annotations

from gated_react.nodes.validate import validate

from ..helpers import agent, state


def test_valid_json_action_is_recorded() -> None:
    reply = {"text": '{"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}}'}
    update = validate(state(reply=reply), agent=agent(protocol="json"))
    assert update == {
        "action": {"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}}
    }
    retried = validate(
        state(reply=reply, retry={"why": "bad_json", "message": "m", "count": 1}),
        agent=agent(protocol="json"),
    )
    assert retried["retry"] is None  # a valid reply ends the reminders


def test_invalid_reply_stops_by_default() -> None:
    update = validate(state(reply={"text": '{"kind": "maybe"}'}), agent=agent(protocol="json"))
    assert update["stop_reason"] == "invalid_action:bad_kind"
    assert "bad_kind" in update["message"]


def test_retry_mode_gives_reminders_then_stops() -> None:
    parts = agent(protocol="text", on_invalid_action="retry", max_invalid_retries=2)
    first = validate(state(reply={"text": "hmm"}), agent=parts)
    assert first["retry"]["why"] == "no_action"
    assert first["retry"]["count"] == 1
    assert "stop_reason" not in first
    third = validate(
        state(reply={"text": "hmm"}, retry={"why": "no_action", "message": "m", "count": 2}),
        agent=parts,
    )
    assert third["stop_reason"] == "invalid_action:no_action"


def test_a_retry_never_exceeds_max_steps() -> None:
    parts = agent(protocol="text", on_invalid_action="retry", max_steps=3)
    update = validate(state(reply={"text": "hmm"}, usage={"steps": 3}), agent=parts)
    assert update["stop_reason"] == "max_steps"
