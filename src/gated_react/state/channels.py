"""The graph's state: ``CoreState``, what most nodes read, and ``State``, which adds the logs;
each field a channel of the graph, and what a node writes to one (``dump``).

``history``, ``trace`` and ``messages`` are ``DeltaChannel``s: a checkpoint stores the new
entries, not the whole list again, so storage grows linearly with the run instead of
quadratically.
"""

import operator
import threading
from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
)
from langgraph.channels import DeltaChannel
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field

from gated_react.state.actions import Action, Reply, Retry
from gated_react.state.base import StrictModel
from gated_react.state.calls import Call, HistoryEntry, TraceEntry
from gated_react.state.run import RunContext, Status
from gated_react.state.usage import Extension, Usage


def _append(current: list[Any] | None, writes: Sequence[list[Any]]) -> list[Any]:
    """Reducer for append-only logs; batching-invariant as DeltaChannel requires."""
    out = list(current or ())
    for batch in writes:
        out.extend(batch)
    return out


def _add_messages(current: list[Any] | None, writes: Sequence[Any]) -> list[Any]:
    """``add_messages`` folded over a batch: a DeltaChannel's reducer, so a checkpoint stores
    the step's new messages, not the whole conversation again. New messages with ids of their
    own (what the nodes write) are appended as ``add_messages`` would append them, checked
    against the ids of the conversation this reducer returned last (``_KNOWN``): walking the
    whole conversation per write cost 0.15 ms at 300 steps, and a replay of N writes N times
    that; anything else (a removal, a replacement, a message without an id) is its own."""
    out: list[Any] = current if current is not None else []  # never changed in place
    for batch in writes:
        out = _appended(out, batch) or list(add_messages(out, batch))
    return out if out is not current else list(out)


_KNOWN: dict[int, tuple[list[Any], set[str]]] = {}
"""Conversations the fast path returned, by ``id()``, each with the set of its ids. A set is
shared by a conversation and the one extended from it, so an older conversation's set has
more ids than it has messages, and is rebuilt if it is ever extended again (a fork)."""
_KNOWN_LOCK = threading.Lock()
_KNOWN_MAX = 64
"""Conversations remembered: one per run in flight is what counts (a worker runs up to its
concurrency at once); older ones are dropped, oldest first, and rebuilt if met again."""


def _appended(messages: list[Any], batch: Any) -> list[Any] | None:
    """``messages`` then ``batch`` when ``add_messages`` would give exactly that (plain messages
    on both sides, every id set, the new ones new and distinct), else None."""
    if not isinstance(batch, list) or not all(map(_plain, set(map(type, batch)))):
        return None
    new = list(map(_ID, batch))
    known = _ids(messages)
    if known is None or None in new or len(set(new)) != len(new) or not known.isdisjoint(new):
        return None
    out = [*messages, *batch]
    with _KNOWN_LOCK:  # runs on many threads share it (a sync worker's pool)
        known.update(new)
        _KNOWN.pop(id(messages), None)
        _KNOWN[id(out)] = (out, known)
        while len(_KNOWN) > _KNOWN_MAX:
            del _KNOWN[next(iter(_KNOWN))]
    return out


def _ids(messages: list[Any]) -> set[str] | None:
    """The ids of ``messages`` (a set of its own or shared from ``_KNOWN``: extended in place
    by the caller); None when a message is not plain or has no id."""
    remembered = _KNOWN.get(id(messages))
    if remembered is not None and remembered[0] is messages and len(remembered[1]) == len(messages):
        return remembered[1]
    if not all(map(_plain, set(map(type, messages)))):
        return None
    known = set(map(_ID, messages))
    return None if None in known or len(known) != len(messages) else known


_ID = operator.attrgetter("id")


def _plain(kind: type) -> bool:
    return issubclass(kind, BaseMessage) and not issubclass(kind, BaseMessageChunk | RemoveMessage)


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
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_messages)] = Field(default_factory=list)
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
