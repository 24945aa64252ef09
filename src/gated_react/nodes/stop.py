"""stop: the one exit for every end that is not a final answer."""

from __future__ import annotations

from typing import Any, Optional, TypedDict

from langchain_core.runnables import RunnableConfig

from gated_react._engine.reads import RUNS, read
from gated_react._engine.turns import closing
from gated_react.errors import MisroutedStep
from gated_react.state import CoreState
from gated_react.stops import has_ended


class StopChannels(TypedDict, total=False):
    """The channels stop reads, as stored: the graph hands it these alone, and ``read``
    validates them into a ``CoreState`` that has no other field."""

    stop_reason: str | None
    message: str | None
    status: str | None


def stop(
    state: CoreState | StopChannels,
    config: Optional[RunnableConfig] = None,  # noqa: UP045 (the spelling LangGraph injects into)
) -> dict[str, Any]:
    """Write the stopped end (and tell the conversation why). The node that detected the stop
    already named its reason. A run that has ended keeps its end: only an edit of an ended
    thread reaches this node again, and its answer and status stand."""
    state = read(CoreState, state, StopChannels, config)
    RUNS.end(config)  # the run's last read: what it kept goes
    if has_ended(state.status, state.stop_reason):
        return {}
    if not state.stop_reason:
        raise MisroutedStep("stop", "with no stop reason recorded")
    message = state.message or state.stop_reason
    said = f"I stopped before finishing ({state.stop_reason}): {message}"
    return {
        "status": "stopped",
        "answer": None,
        "structured_response": None,
        "message": message,
        **closing(said),
    }
