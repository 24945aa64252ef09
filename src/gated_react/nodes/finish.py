"""finish: the run ends with the model's final answer."""

from __future__ import annotations

from typing import Any

from gated_react._engine.turns import closing
from gated_react.state import CoreState, FinalAction
from gated_react.stops import StopReason


def finish(state: CoreState) -> dict[str, Any]:
    """Write the successful end: status ``ok``, stop reason ``success`` and the answer (also
    as the conversation's AI message)."""
    if not isinstance(state.action, FinalAction):
        raise TypeError("finish runs only after validate produced a final answer")
    steps = state.usage.steps
    return {
        "status": "ok",
        "stop_reason": str(StopReason.SUCCESS),
        "message": f"final answer after {steps} step{'s' if steps != 1 else ''}",
        "answer": state.action.answer,
        **closing(state.action.answer),
    }
