"""Human approval: the question the gate asks through ``interrupt()`` and the answers it accepts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph.types import interrupt

from gated_react._engine.storable import plain
from gated_react.runs import UNSTORABLE_ANSWER

ANSWERS = {
    "approve": {"approved": True},
    "approve_with_edits": {"approved": True, "args": {"...": "..."}},
    "reject": {"approved": False, "reason": "why"},
}


@dataclass(frozen=True, slots=True)
class Decision:
    """A human's valid answer."""

    approved: bool
    args: dict[str, Any] | None = None
    reason: str = ""


def parse_answer(value: Any) -> Decision:
    """A Decision from a resume value; raises ValueError naming what is wrong."""
    if isinstance(value, dict) and set(value) == {UNSTORABLE_ANSWER}:
        raise ValueError(f"no store can hold it ({value[UNSTORABLE_ANSWER]})")
    if not isinstance(value, dict):
        raise ValueError(
            f"expected an object like {ANSWERS['approve']}, got {type(value).__name__}"
        )
    unknown = sorted(set(value) - {"approved", "args", "reason"})
    if unknown:
        raise ValueError(f"unknown keys {unknown[:5]}; allowed: approved, args, reason")
    approved = value.get("approved")
    if not isinstance(approved, bool):
        raise ValueError("'approved' must be true or false")
    args = value.get("args")
    if args is not None and (not approved or not isinstance(args, dict)):
        raise ValueError("'args' must be an object and goes only with approved=true")
    if args is not None:
        args = plain(args)  # Unstorable (a ValueError) names what no store could hold
    reason = value.get("reason", "")
    if not isinstance(reason, str):
        raise ValueError("'reason' must be a string")
    return Decision(approved=approved, args=args, reason=reason.strip())


def ask(
    question: dict[str, Any], check_args: Callable[[dict[str, Any]], str | None] | None = None
) -> Decision:
    """Pause the run until a human answers; a malformed answer, or edited arguments that
    ``check_args`` refuses (it says why), asks again with the error."""
    error = None
    while True:
        value = interrupt({**question, "answers": ANSWERS, "error": error})
        try:
            decision = parse_answer(value)
        except ValueError as exc:
            error = f"your last answer was not understood: {exc}"
            continue
        why = None if decision.args is None or check_args is None else check_args(decision.args)
        if why is None:
            return decision
        error = f"the edited arguments were refused: {why}"
