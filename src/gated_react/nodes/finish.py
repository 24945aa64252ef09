"""finish: the run ends with the model's final answer."""

from __future__ import annotations

import json
from typing import Any, Optional, TypedDict

from langchain_core.runnables import RunnableConfig

from gated_react._engine.deps import NodeDeps
from gated_react._engine.reads import RUNS, read
from gated_react._engine.turns import closing
from gated_react.errors import MisroutedStep
from gated_react.state import CoreState, FinalAction
from gated_react.stops import StopReason, has_ended


class FinishChannels(TypedDict, total=False):
    """The channels finish reads, as stored: the graph hands it these alone, and ``read``
    validates them into a ``CoreState`` that has no other field."""

    reply: dict[str, Any] | None
    action: dict[str, Any] | None
    usage: dict[str, Any]
    stop_reason: str | None
    message: str | None
    answer: str | None
    status: str | None


def finish(
    state: CoreState | FinishChannels,
    config: Optional[RunnableConfig] = None,  # noqa: UP045 (the spelling LangGraph injects into)
    *,
    deps: NodeDeps | None = None,
) -> dict[str, Any]:
    """Write the successful end: status ``ok``, stop reason ``success`` and the answer (also
    as the conversation's AI message); under an answer schema, the answer's data as
    ``structured_response`` too (validate checked it fits)."""
    state = read(CoreState, state, FinishChannels, config)
    RUNS.end(config)  # the run's last read: what it kept goes
    if has_ended(state.status, state.stop_reason):  # an edit reached an ended run again
        return {}
    if _returned_directly(state):
        return _direct_end(state)
    if not isinstance(state.action, FinalAction):
        raise MisroutedStep("finish", "without a final answer")
    steps = state.usage.steps
    structured = deps is not None and deps.policy.answer_schema is not None
    return {
        "structured_response": json.loads(state.action.answer) if structured else None,
        "status": "ok",
        "stop_reason": str(StopReason.SUCCESS),
        "message": f"final answer after {steps} step{'s' if steps != 1 else ''}",
        "answer": state.action.answer,
        **_closing(state, state.action.answer),
    }


def _returned_directly(state: CoreState) -> bool:
    """Whether observe ended the run on a ``return_direct`` tool's result."""
    tools = state.action is not None and not isinstance(state.action, FinalAction)
    return tools and state.stop_reason == StopReason.SUCCESS and state.answer is not None


def _direct_end(state: CoreState) -> dict[str, Any]:
    """The successful end on a ``return_direct`` tool's result: the conversation ends with
    its ``ToolMessage``, as under ``create_agent`` (no AI message repeats it); no
    ``structured_response``, which only the model's answer gives."""
    return {
        "structured_response": None,
        "status": "ok",
        "stop_reason": state.stop_reason,
        "message": state.message,
        "answer": state.answer,
    }


def _closing(state: CoreState, answer: str) -> dict[str, Any]:
    """The answer's AI message: the reply's text as written (what may have streamed, spaces
    and newlines at its ends included) under the reply's id when the answer is that text, so
    the chunks joined are the stored message; else the answer under an id of its own."""
    streamed = _streamed_as(state)
    text = state.reply.text if streamed is not None and state.reply is not None else answer
    return closing(text, streamed, state.reply)


def _streamed_as(state: CoreState) -> str | None:
    """The reply's id when the answer is its text as written (what may have streamed)."""
    reply, action = state.reply, state.action
    if reply is None or not isinstance(action, FinalAction) or reply.tool_calls:
        return None
    return reply.id if reply.text.strip() == action.answer else None
