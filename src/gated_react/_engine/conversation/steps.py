"""What the nodes share about the step in hand (``State.step``): reading it, ending it, and the
writes that go with a message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Overwrite
from opentelemetry.trace import Span
from pydantic import ValidationError

from gated_react._engine.conversation.step_channel import read, stored
from gated_react._engine.conversation.turns import run_of
from gated_react._engine.langgraph_internals import beside_a_question
from gated_react._engine.observability import tracing
from gated_react.errors import MisroutedStep
from gated_react.state import Ending, Step
from gated_react.stops import Stop

if TYPE_CHECKING:  # the parts' type only: deps is built from the modules that use it
    from gated_react._engine.deps import NodeDeps

_ENDS = ("status", "stop_reason", "message")
STEPPED = frozenset({"validate", "gate", "execute", "observe", "finish", "stop"})
"""The nodes that take the step in hand: every node but ``decide``, which makes it."""


def step_of(state: Mapping[str, Any], node: str) -> Step:
    """The step in hand, or ``MisroutedStep`` when there is none (an edit sent a node where
    the graph never sends it, or the thread was written before the step existed)."""
    found = state.get("step")
    if not found:
        raise MisroutedStep(
            node,
            "with no step in hand (the thread was written by gated-react before 0.1.0, or edited)",
        )
    try:
        return read(found)
    except ValidationError:
        raise MisroutedStep(node, "with a step that is not one (edited or damaged)") from None


def stranded(values: Mapping[str, Any], nodes: Sequence[str]) -> str | None:
    """The first of ``nodes`` (those left to run) that would take a step the thread does not
    hold: a thread a release before 0.1.0 left paused or killed in a step, which it kept in
    channels read no more. None when every node left can run."""
    if values.get("step"):
        return None
    return next((node for node in nodes if node in STEPPED), None)


def run_step(
    state: Mapping[str, Any], node: str, saved: bool, config: RunnableConfig | None = None
) -> Step:
    """The step in hand, which must belong to the run the conversation is on: a step an edit
    moved to another run (or a fresh one, with budgets of its own) is refused, and so is a
    node a ``Command(goto=...)`` scheduled beside another node's waiting question (an answer
    meant for that question must never be taken for another call)."""
    if config is not None and beside_a_question(config):
        raise MisroutedStep(node, "beside another node's waiting question")
    step = step_of(state, node)
    if not run_of(state.get("messages") or [], step.run, saved):
        raise MisroutedStep(node, "with a step of another run than the conversation's")
    return step


def stale(state: Mapping[str, Any]) -> dict[str, Any]:
    """Clears the thread's previous run's end, if it is still shown: written with a run's
    first message, so the end a client reads is always the run's own."""
    return dict.fromkeys(_ENDS) if any(state.get(key) is not None for key in _ENDS) else {}


def ending(
    step: Step, stop: Stop, call: str | None = None, at: int | None = None
) -> dict[str, Any]:
    """The write that hands ``stop`` to the ``stop`` node (``call``: the call that caused
    it; ``at``: the decisions made by then)."""
    held = Ending(reason=str(stop), message=stop.message or str(stop), call=call, step=at)
    return {"step": stored(step.model_copy(update={"ending": held}))}


def ended(update: dict[str, Any], deps: NodeDeps, span: Span) -> dict[str, Any]:
    """A stop a model call caused, recorded on its span too."""
    held = (update.get("step") or {}).get("ending") or {}
    tracing.chat_failed(deps.spans, span, held.get("reason", ""), held.get("message", ""))
    return update


def joined(update: dict[str, Any], more: list[Any]) -> dict[str, Any]:
    """``update`` with ``more`` messages after the ones it writes (one write)."""
    before = update.get("messages")
    if before is None:
        return update | {"messages": more}
    if isinstance(before, Overwrite):
        return update | {"messages": Overwrite([*before.value, *more])}
    return update | {"messages": [*before, *more]}
