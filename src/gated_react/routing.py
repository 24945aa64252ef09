"""Routers: pure functions of the step in hand that name a branch. Each path map sends branches
to nodes, so ``draw_mermaid()`` and Studio draw every edge with its label.

Routers read the ``step`` channel as stored (plain JSON): routing validates nothing and costs
the same at every step.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Literal, TypedDict

AfterDecide = Literal["reply", "stop"]
AfterValidate = Literal["tool", "final", "retry", "stop"]
AfterGate = Literal["allowed", "stop"]
AfterObserve = Literal["next", "direct", "stop"]

AFTER_DECIDE: dict[Hashable, str] = {"reply": "validate", "stop": "stop"}
AFTER_VALIDATE: dict[Hashable, str] = {
    "tool": "gate",
    "final": "finish",
    "retry": "decide",
    "stop": "stop",
}
AFTER_GATE: dict[Hashable, str] = {"allowed": "execute", "stop": "stop"}
AFTER_OBSERVE: dict[Hashable, str] = {"next": "decide", "direct": "finish", "stop": "stop"}


class Route(TypedDict, total=False):
    """The channel routers read, as stored (plain JSON)."""

    step: dict[str, Any] | None


def _step(state: Route) -> dict[str, Any]:
    # a step written through the state API may be anything: a router only routes (the node it
    # routes to refuses a step it cannot read, in one line)
    found = state.get("step")
    return found if isinstance(found, dict) else {}


def after_decide(state: Route) -> AfterDecide:
    """A stop (a spent budget, a failed model call) stops; a reply goes to validation."""
    return "stop" if _step(state).get("ending") else "reply"


def after_validate(state: Route) -> AfterValidate:
    """Tool calls go to the gate, final answers finish, malformed replies retry or stop."""
    step = _step(state)
    if step.get("ending"):
        return "stop"
    if step.get("answer"):
        return "final"
    return "tool" if step.get("calls") else "retry"


def after_gate(state: Route) -> AfterGate:
    """The calls the gate settled go to execute (which runs the admitted ones and answers
    the rest); a stop stops."""
    return "stop" if _step(state).get("ending") else "allowed"


def after_observe(state: Route) -> AfterObserve:
    """Finish on a ``return_direct`` result, stop when the step stopped the run, else decide
    again."""
    step = _step(state)
    if step.get("ending"):
        return "stop"
    return "direct" if step.get("answer") else "next"
