"""Routers: pure functions of the state that name a branch. Each path map sends branches to nodes,
so ``draw_mermaid()`` and Studio draw every edge with its label.

Routers read the raw channel values through ``Route`` (a TypedDict), so routing validates nothing
and costs the same at every step.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Literal, TypedDict

AfterDecide = Literal["reply", "stop"]
AfterValidate = Literal["tool", "final", "retry", "stop"]
AfterGate = Literal["allowed", "refused", "stop"]
AfterObserve = Literal["next", "direct", "stop"]

AFTER_DECIDE: dict[Hashable, str] = {"reply": "validate", "stop": "stop"}
AFTER_VALIDATE: dict[Hashable, str] = {
    "tool": "gate",
    "final": "finish",
    "retry": "decide",
    "stop": "stop",
}
AFTER_GATE: dict[Hashable, str] = {"allowed": "execute", "refused": "observe", "stop": "stop"}
AFTER_OBSERVE: dict[Hashable, str] = {"next": "decide", "direct": "finish", "stop": "stop"}


class Route(TypedDict, total=False):
    """The channels routers read, as stored (plain JSON)."""

    stop_reason: str | None
    action: dict[str, Any] | None
    calls: list[dict[str, Any]]


def after_decide(state: Route) -> AfterDecide:
    """A failed model call stops; a reply goes to validation."""
    return "stop" if state.get("stop_reason") else "reply"


def after_validate(state: Route) -> AfterValidate:
    """Tool calls go to the gate, final answers finish, malformed replies retry or stop."""
    if state.get("stop_reason"):
        return "stop"
    action = state.get("action")
    if action is None:
        return "retry"
    return "final" if action["kind"] == "final" else "tool"


def after_gate(state: Route) -> AfterGate:
    """Allowed calls run; a step whose calls were all refused (shown to the model) goes
    straight to observe."""
    if state.get("stop_reason"):
        return "stop"
    calls = state.get("calls") or []
    settled = bool(calls) and all(call.get("outcome") is not None for call in calls)
    return "refused" if settled else "allowed"


def after_observe(state: Route) -> AfterObserve:
    """Finish when a ``return_direct`` tool's result is the answer (observe wrote the run's
    success); stop when the call stopped the run or a budget is spent; else decide again."""
    reason = state.get("stop_reason")
    if reason == "success":
        return "direct"
    return "stop" if reason else "next"
