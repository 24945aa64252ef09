"""Which pending calls the gate counted for the run's step, read from the run's own record."""

from __future__ import annotations

from typing import Any

import pytest

from gated_react._engine.call_keys import loop_key
from gated_react._engine.pending import before_the_gate, gate_counted, step_record
from gated_react.state import Call

from ..support.helpers import state

ARGS = {"user_id": 42}
KEY = loop_key("get_user_billing", ARGS)


def _call(call_id: str | None = "c1", step: int = 2) -> Call:
    return Call(step=step, tool="get_user_billing", args=ARGS, key="k", id=call_id)


def _state(**fields: Any) -> Any:
    """A run at its second step, whose reply proposed call c1, which the gate counted."""
    base: dict[str, Any] = {
        "action": {"kind": "tool", "name": "get_user_billing", "args": ARGS, "id": "c1"},
        "seen": [loop_key("lookup", {"n": 1}), KEY],
        "usage": {"steps": 2, "tool_calls": 2, "per_tool": {"get_user_billing": 1, "lookup": 1}},
    }
    return state(**{**base, **fields})


def test_the_calls_of_the_reply_the_gate_counted_are_taken_back_once() -> None:
    current = _state()
    usage, keys, counted = before_the_gate(current, [_call()], step_record(current))
    assert counted
    assert (usage.tool_calls, usage.per_tool["get_user_billing"]) == (1, 0)
    assert keys == [loop_key("lookup", {"n": 1})]


@pytest.mark.parametrize(
    ("why", "fields", "call_id"),
    [
        ("another id than the reply's", {}, "forged"),
        ("no id at all", {}, None),
        ("the run has a stop reason", {"stop_reason": "max_steps"}, "c1"),
        ("the run has ended", {"status": "ok"}, "c1"),
        ("its loop key is not last", {"seen": [KEY, loop_key("lookup", {"n": 1})]}, "c1"),
        (
            "it completed at this step",
            {
                "history": [
                    {
                        "step": 2,
                        "action": {"name": "get_user_billing", "args": ARGS, "id": "c1"},
                        "observation": "ok",
                    }
                ]
            },
            "c1",
        ),
    ],
)
def test_any_other_calls_are_new_proposals(
    why: str, fields: dict[str, Any], call_id: str | None
) -> None:
    current = _state(**fields)
    usage, keys, counted = before_the_gate(current, [_call(call_id)], step_record(current))
    assert not counted, why
    assert (usage, keys) == (current.usage, current.seen)


def test_a_call_completed_at_an_earlier_step_under_the_same_id_does_not_count() -> None:
    """A server that reuses call ids across steps: only this step's history is compared."""
    earlier = {
        "step": 1,
        "action": {"name": "get_user_billing", "args": ARGS, "id": "c1"},
        "observation": "ok",
    }
    current = _state(history=[earlier])
    assert gate_counted(current, [_call()], step_record(current))
