"""Routers as tables: every branch, and path maps that match the routers' Literal types."""

from __future__ import annotations

from typing import Any, get_args, get_type_hints

import pytest

from gated_react import routing

from .support.helpers import state
from .test_graph import STEP_NODES

TOOL = {"kind": "tool", "name": "t", "args": {}}
FINAL = {"kind": "final", "answer": "a"}
CALL = {"step": 1, "tool": "t", "args": {}, "key": "k"}


@pytest.mark.parametrize(
    ("router", "fields", "branch"),
    [
        (routing.after_decide, {"reply": {"text": "x"}}, "reply"),
        (routing.after_decide, {"stop_reason": "llm_timeout"}, "stop"),
        (routing.after_validate, {"action": TOOL}, "tool"),
        (routing.after_validate, {"action": FINAL}, "final"),
        (
            routing.after_validate,
            {"retry": {"why": "no_action", "message": "m", "count": 1}},
            "retry",
        ),
        (routing.after_validate, {"stop_reason": "invalid_action:bad_json"}, "stop"),
        (routing.after_gate, {"calls": [CALL]}, "allowed"),
        (routing.after_gate, {"calls": [{**CALL, "outcome": {"ok": False}}]}, "refused"),
        (routing.after_gate, {"stop_reason": "tool_denied:t"}, "stop"),
        (routing.after_observe, {}, "next"),
        (routing.after_observe, {"stop_reason": "max_steps"}, "stop"),
        (routing.after_observe, {"stop_reason": "success"}, "direct"),
    ],
)
def test_branches(router: Any, fields: dict[str, Any], branch: str) -> None:
    assert router(state(**fields).model_dump(mode="json")) == branch
    assert router(fields) == branch


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
