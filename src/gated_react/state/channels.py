"""The graph's state: ``CoreState``, what most nodes read, and ``State``, which adds the logs;
each field a channel of the graph, and what a node writes to one (``dump``).

``history``, ``trace`` and ``messages`` are ``DeltaChannel``s: a checkpoint stores the new
entries, not the whole list again, so storage grows linearly with the run instead of
quadratically.
"""

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.channels import DeltaChannel
from pydantic import BaseModel, Field

from gated_react.state.actions import Action, Reply, Retry
from gated_react.state.base import StrictModel
from gated_react.state.calls import Call, HistoryEntry, TraceEntry
from gated_react.state.conversation import add_messages_fast
from gated_react.state.run import RunContext, Status
from gated_react.state.usage import Extension, Usage


def _append(current: list[Any] | None, writes: Sequence[list[Any]]) -> list[Any]:
    """Reducer for append-only logs; batching-invariant as DeltaChannel requires."""
    out = list(current or ())
    for batch in writes:
        out.extend(batch)
    return out


class CoreState(StrictModel):
    """The state without its logs: what most nodes read. Validating it costs the same at step 1
    and at step 1,000, so only the nodes that need the logs pay for them (decide, gate)."""

    goal: str = ""
    """The task, in the user's words (from the last human message when a run starts from
    ``messages``)."""
    reply: Reply | None = None
    """The model's latest raw reply."""
    action: Action | None = None
    """The latest reply after the action contract: tool calls or a final answer."""
    calls: list[Call] = Field(default_factory=list)
    """The calls of this step between gate and observe, in the reply's order; an outcome is
    None while its call has not finished."""
    retry: Retry | None = None
    """Set while a malformed reply is being retried with a reminder."""
    usage: Usage = Field(default_factory=Usage)
    """Budget consumption."""
    run_context: RunContext | None = None
    """What this run ran under: model, base URL, protocol, policy and its hash, version."""
    extensions: list[Extension] = Field(default_factory=list)
    """Budget extensions humans granted this run, oldest first; the policy's ``Budget`` stays
    as it was (``budget_checks.limits`` combines them)."""
    seen: Annotated[list[str], DeltaChannel(_append)] = Field(default_factory=list)
    """Loop keys of the calls made so far: tool, exact and normalized argument hashes."""
    seen_from: int = 0
    """Loop keys before this index belong to earlier runs on the thread (not compared)."""
    spend: Annotated[list[float | None], DeltaChannel(_append)] = Field(default_factory=list)
    """What each model reply cost in USD (None: unpriced), append-only: ``max_cost`` counts
    the run's record, never less, so an edit of ``usage.cost`` alone cannot buy more spend."""
    spend_from: int = 0
    """Entries of ``spend`` before this index belong to earlier runs on the thread."""
    history_from: int = 0
    """History entries before this index belong to earlier runs on the thread."""
    turn: str | None = None
    """The id of the human message in ``messages`` this run answers: a message after it, or a
    goal that differs from it, is a new turn that ends this run if it is unfinished."""
    status: Status | None = None
    """``ok`` or ``stopped`` once the run has ended."""
    stop_reason: str | None = None
    """Why the run ended (or is ending)."""
    message: str | None = None
    """A human sentence about the end."""
    answer: str | None = None
    """The final answer after success."""
    traceparent: str | None = None
    """The W3C trace context of the last traced invocation on this thread, so the next one
    (a resume) links its span to it; None while no OpenTelemetry SDK records."""


class State(CoreState):
    """Everything a run knows; the checkpointer saves it after every node."""

    history: Annotated[list[HistoryEntry], DeltaChannel(_append)] = Field(default_factory=list)
    """Completed tool steps (append-only)."""
    trace: Annotated[list[TraceEntry], DeltaChannel(_append)] = Field(default_factory=list)
    """Every call that reached the gate (append-only)."""
    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_fast)] = Field(
        default_factory=list
    )
    """The conversation, across runs: goals, the tool calls and their results, answers
    (append-only but for a message replaced under its own id)."""
    structured_response: dict[str, Any] | None = None
    """The answer as ``response_format``'s data (plain JSON), after success with a schema;
    written by finish and stop, read by no node (so no step pays for reading it)."""


def dump(model: BaseModel | None) -> dict[str, Any] | None:
    """Plain JSON for a channel write; log entries leave out their unset optional fields."""
    if model is None:
        return None
    return model.model_dump(mode="json", exclude_none=isinstance(model, TraceEntry))
