"""Why a run ended: a closed set of reasons, each optionally refined by a detail.

A stop is data written into the run's state (``stop_reason`` and ``message``), never only an
exception. ``str(stop)`` is the machine-readable form users match on, e.g. ``tool_denied:refund``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class StopReason(StrEnum):
    """Every way a run can end. Reasons marked ``:<detail>`` carry a tool name or a cause."""

    SUCCESS = "success"
    MAX_STEPS = "max_steps"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_SECONDS = "max_seconds"
    MAX_TOKENS = "max_tokens"
    MAX_COST = "max_cost"
    LOOP_DETECTED = "loop_detected"
    TOOL_LIMIT = "tool_limit"  # :<tool>
    TOOL_MISSING = "tool_missing"  # :<tool>
    TOOL_DENIED = "tool_denied"  # :<tool>
    TOOL_REJECTED = "tool_rejected"  # :<tool>
    APPROVAL_UNAVAILABLE = "approval_unavailable"  # :<tool>
    TOOL_BAD_ARGS = "tool_bad_args"  # :<tool>
    TOOL_TIMEOUT = "tool_timeout"  # :<tool>
    TOOL_ERROR = "tool_error"  # :<tool>
    TOOL_OUTCOME_UNKNOWN = "tool_outcome_unknown"  # :<tool>
    INVALID_ACTION = "invalid_action"  # :<why>
    LLM_TIMEOUT = "llm_timeout"
    LLM_ERROR = "llm_error"  # :<kind>
    MIDDLEWARE_ERROR = "middleware_error"  # :<middleware>


# Stops caused by something failing (model, tool, crash) rather than by the policy refusing.
_FAILURES = frozenset(
    {
        StopReason.LLM_TIMEOUT,
        StopReason.LLM_ERROR,
        StopReason.MIDDLEWARE_ERROR,
        StopReason.TOOL_ERROR,
        StopReason.TOOL_TIMEOUT,
        StopReason.TOOL_OUTCOME_UNKNOWN,
    }
)


@dataclass(frozen=True, slots=True)
class Stop:
    """A decision to end the run: a reason, an optional detail and a message with numbers."""

    reason: StopReason
    detail: str | None = None
    message: str = ""

    def __str__(self) -> str:
        return f"{self.reason}:{self.detail}" if self.detail else str(self.reason)

    def update(self) -> dict[str, str]:
        """The state update that records this stop."""
        return {"stop_reason": str(self), "message": self.message or str(self)}


def parse_stop_reason(value: str) -> tuple[StopReason, str | None]:
    """Split ``"tool_denied:refund"`` into member and detail; ValueError if unknown."""
    head, _, detail = value.partition(":")
    return StopReason(head), detail or None


def is_failure(stop_reason: str) -> bool:
    """True when a stop means a model or tool failed, False for success and policy stops."""
    reason, _ = parse_stop_reason(stop_reason)
    return reason in _FAILURES


def has_ended(status: str | None, stop_reason: str | None) -> bool:
    """Whether a thread's latest run has ended: both its status and its stop reason are
    written (a run never ends without either) and agree (``ok`` exactly for ``success``), so
    an edit of ``status`` alone ends nothing, opens no run with fresh budgets, and never makes
    a stop the gate just decided read as a success."""
    if not status or not stop_reason:
        return False
    return (status == "ok") == (stop_reason == StopReason.SUCCESS)


def ended_status(values: Mapping[str, Any]) -> str | None:
    """The status of a thread's latest run from its stored channels: None unless it ended."""
    status = values.get("status")
    return status if has_ended(status, values.get("stop_reason")) else None


_SAID: dict[StopReason, str] = {
    StopReason.MAX_STEPS: "I ran out of steps before I could finish",
    StopReason.MAX_TOOL_CALLS: (
        "I reached the number of tool calls I may make before I could finish"
    ),
    StopReason.MAX_SECONDS: "I ran out of time before I could finish",
    StopReason.MAX_TOKENS: "I used up the tokens I was given before I could finish",
    StopReason.MAX_COST: "I reached my spending limit before I could finish",
    StopReason.LOOP_DETECTED: "I was about to repeat a step I had already taken, so I stopped",
    StopReason.TOOL_LIMIT: "I reached the number of times I may use {detail} before I could finish",
    StopReason.TOOL_MISSING: "I tried to use {detail}, which I don't have, so I stopped",
    StopReason.TOOL_DENIED: "I'm not allowed to use {detail}, so I stopped there",
    StopReason.TOOL_REJECTED: "I didn't use {detail}: a reviewer turned it down",
    StopReason.APPROVAL_UNAVAILABLE: (
        "I couldn't use {detail}: it needs a person's approval, and nobody can be asked here"
    ),
    StopReason.TOOL_BAD_ARGS: "I couldn't use {detail}: I got its inputs wrong",
    StopReason.TOOL_TIMEOUT: "{detail} took too long to answer, so I stopped",
    StopReason.TOOL_ERROR: "{detail} failed, so I stopped",
    StopReason.TOOL_OUTCOME_UNKNOWN: (
        "I can't tell whether {detail} went through, so I stopped before doing anything else"
    ),
    StopReason.INVALID_ACTION: "I couldn't produce a valid next step, so I stopped",
    StopReason.LLM_TIMEOUT: "The model took too long to answer, so I stopped",
    StopReason.LLM_ERROR: "The model could not be reached or failed to answer, so I stopped",
    StopReason.MIDDLEWARE_ERROR: "Something in my setup failed ({detail}), so I stopped",
}


def said(stop_reason: str, message: str) -> str:
    """What the agent says when a run stops, as a person reads it: a sentence, then the
    details with their numbers (the stop reason stays in the state for programs)."""
    try:
        reason, detail = parse_stop_reason(stop_reason)
    except ValueError:
        return f"I stopped before finishing: {message}."
    text = _SAID.get(reason, "I stopped before finishing").format(detail=detail or "a tool")
    details = message.rstrip(".")
    return f"{text}. ({details}.)" if details else f"{text}."
