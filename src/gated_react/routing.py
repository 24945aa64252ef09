"""Routers: pure functions of the state that name a branch. Each path map sends branches to nodes,
so ``draw_mermaid()`` and Studio draw every edge with its label."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Literal

from gated_react.state import FinalAction, State, ToolAction

AfterDecide = Literal["reply", "stop"]
AfterValidate = Literal["tool", "final", "retry", "stop"]
AfterGate = Literal["allowed", "refused", "stop"]
AfterObserve = Literal["next", "stop"]

AFTER_DECIDE: dict[Hashable, str] = {"reply": "validate", "stop": "stop"}
AFTER_VALIDATE: dict[Hashable, str] = {
    "tool": "gate",
    "final": "finish",
    "retry": "decide",
    "stop": "stop",
}
AFTER_GATE: dict[Hashable, str] = {"allowed": "execute", "refused": "observe", "stop": "stop"}
AFTER_OBSERVE: dict[Hashable, str] = {"next": "decide", "stop": "stop"}


def after_decide(state: State) -> AfterDecide:
    """A failed model call stops; a reply goes to validation."""
    return "stop" if state.stop_reason else "reply"


def after_validate(state: State) -> AfterValidate:
    """Tool calls go to the gate, final answers finish, malformed replies retry or stop."""
    if state.stop_reason:
        return "stop"
    if isinstance(state.action, ToolAction):
        return "tool"
    if isinstance(state.action, FinalAction):
        return "final"
    return "retry"


def after_gate(state: State) -> AfterGate:
    """Allowed calls run; refusals the model may see go straight to observe."""
    if state.stop_reason:
        return "stop"
    if state.call is not None and state.call.outcome is not None:
        return "refused"
    return "allowed"


def after_observe(state: State) -> AfterObserve:
    """Stop when the call stopped the run or a budget is spent; else decide again."""
    return "stop" if state.stop_reason else "next"
