from __future__ import annotations

from typing import Any

import pytest

from gated_react.stops import (
    Stop,
    StopReason,
    ended_status,
    has_ended,
    is_failure,
    parse_stop_reason,
)


def test_str_joins_reason_and_detail() -> None:
    assert str(Stop(StopReason.TOOL_DENIED, "refund")) == "tool_denied:refund"
    assert str(Stop(StopReason.MAX_STEPS)) == "max_steps"
    assert Stop(StopReason.SUCCESS).update() == {"stop_reason": "success", "message": "success"}


def test_parse_round_trips_and_rejects_unknown() -> None:
    assert parse_stop_reason("invalid_action:bad_json") == (StopReason.INVALID_ACTION, "bad_json")
    assert parse_stop_reason("success") == (StopReason.SUCCESS, None)
    with pytest.raises(ValueError, match="nope"):
        parse_stop_reason("nope:x")


@pytest.mark.parametrize(
    ("reason", "failure"),
    [
        ("success", False),
        ("max_steps", False),
        ("tool_denied:x", False),
        ("invalid_action:bad_json", False),
        ("llm_timeout", True),
        ("llm_error:rate_limited", True),
        ("middleware_error:PIIMiddleware[email]", True),
        ("tool_error:x", True),
        ("tool_timeout:x", True),
        ("tool_outcome_unknown:x", True),
    ],
)
def test_failures_are_model_or_tool_failures(reason: str, failure: bool) -> None:
    assert is_failure(reason) is failure


@pytest.mark.parametrize(
    ("values", "status"),
    [
        ({"status": "ok", "stop_reason": "success"}, "ok"),
        ({"status": "stopped", "stop_reason": "max_steps"}, "stopped"),
        ({"status": "ok", "stop_reason": None}, None),  # status written alone: an edit
        ({"status": None, "stop_reason": "max_steps"}, None),  # the stop node is yet to run
        ({"status": "ok", "stop_reason": "tool_denied:x"}, None),  # status edited before a stop
        ({"status": "stopped", "stop_reason": "success"}, None),
        ({}, None),
    ],
)
def test_a_run_has_ended_only_with_a_status_and_a_stop_reason(
    values: dict[str, Any], status: str | None
) -> None:
    assert ended_status(values) == status
    assert has_ended(values.get("status"), values.get("stop_reason")) is (status is not None)
