"""Routers as tables: every branch, read from the step in hand, and path maps that match the
routers' Literal types."""

from __future__ import annotations

from typing import Any, get_args, get_type_hints

import pytest

from gated_react import routing

from .support.helpers import state
from .test_graph import STEP_NODES

CALL = {"id": "c1", "tool": "t", "args": {}, "key": "k"}
ENDING = {"reason": "tool_denied:t", "message": "m"}


@pytest.mark.parametrize(
    ("router", "fields", "branch"),
    [
        (routing.after_decide, {"reply": {"text": "x"}}, "reply"),
        (routing.after_decide, {"ending": {"reason": "llm_timeout", "message": "m"}}, "stop"),
        (routing.after_validate, {"calls": [CALL]}, "tool"),
        (routing.after_validate, {"answer": {"text": "a"}}, "final"),
        (
            routing.after_validate,
            {"retry": {"why": "no_action", "message": "m", "count": 1}},
            "retry",
        ),
        (routing.after_validate, {"ending": {**ENDING, "reason": "invalid_action:x"}}, "stop"),
        (routing.after_gate, {"calls": [CALL]}, "allowed"),
        (routing.after_gate, {"calls": [{**CALL, "shown": {"text": "no"}}]}, "allowed"),
        (routing.after_gate, {"calls": [CALL], "ending": ENDING}, "stop"),
        (routing.after_observe, {"calls": [{**CALL, "outcome": {"ok": True}}]}, "next"),
        (routing.after_observe, {"ending": {"reason": "max_steps", "message": "m"}}, "stop"),
        (routing.after_observe, {"answer": {"text": "a", "direct": True}}, "direct"),
    ],
)
def test_branches(router: Any, fields: dict[str, Any], branch: str) -> None:
    assert router(state(**fields)) == branch
    assert router({"step": fields}) == branch


@pytest.mark.parametrize(
    ("router", "path_map"),
    [
        (routing.after_decide, routing.AFTER_DECIDE),
        (routing.after_validate, routing.AFTER_VALIDATE),
        (routing.after_gate, routing.AFTER_GATE),
        (routing.after_observe, routing.AFTER_OBSERVE),
    ],
)
def test_every_branch_the_router_can_return_has_a_target(
    router: Any, path_map: dict[str, str]
) -> None:
    branches = set(get_args(get_type_hints(router)["return"]))
    assert branches == set(path_map)
    assert set(path_map.values()) <= STEP_NODES


def test_a_gate_stop_has_no_refused_branch() -> None:
    """Calls the gate settled (refused and shown, answered by a human) go to execute, which
    answers them; only a stop leaves the step."""
    assert set(routing.AFTER_GATE) == {"allowed", "stop"}


@pytest.mark.parametrize("written", ["garbage", 5, ["calls"], None])
def test_a_step_written_as_anything_is_routed_never_raised(written: object) -> None:
    """Before: ``update_state`` with a step that is not a mapping raised ``AttributeError`` in
    a router (a traceback from the state API); the node routed to refuses it in one line."""
    held: Any = {"step": written}
    assert routing.after_decide(held) == "reply"
    assert routing.after_validate(held) == "retry"
    assert routing.after_gate(held) == "allowed"
    assert routing.after_observe(held) == "next"
