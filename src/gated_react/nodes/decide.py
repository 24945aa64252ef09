"""decide: ask the model once for the next action.

A failing model call ends the run with a stop reason, never with an exception.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig
from langgraph.types import Overwrite
from opentelemetry.trace import Span

from gated_react._engine import tracing
from gated_react._engine.budget_checks import (
    Limits,
    enforce_before_step,
    held_to_spend,
    limits_of,
)
from gated_react._engine.chat import metadata_of, said
from gated_react._engine.deadline import DeadlinePassed, await_within, call_within
from gated_react._engine.deps import NodeDeps
from gated_react._engine.model_errors import classify
from gated_react._engine.pricing import Tokens, add_cost
from gated_react._engine.reads import RUNS, read
from gated_react._engine.storable import Unstorable, clean_text, plain
from gated_react._engine.streaming import model_config
from gated_react._engine.transcript import build_messages
from gated_react._engine.turns import opening
from gated_react.errors import MiddlewareFailed
from gated_react.redact import redact
from gated_react.state import Reply, State, Usage, dump
from gated_react.stops import Stop, StopReason


class Channels(TypedDict, total=False):
    """The channels decide reads, as stored: the graph hands it these alone (never the audit
    log, ``trace``, whose validation cost more with every step; nor the ones only other nodes
    read), and ``state_of`` validates them into a ``State`` that has no other field."""

    goal: str
    action: dict[str, Any] | None
    calls: list[dict[str, Any]]
    retry: dict[str, Any] | None
    usage: dict[str, Any]
    extensions: list[dict[str, Any]]
    seen: list[str]
    seen_from: int
    spend: list[float | None]
    spend_from: int
    history_from: int
    turn: str | None
    status: str | None
    stop_reason: str | None
    history: list[dict[str, Any]]
    messages: list[Any]
    traceparent: str | None


def state_of(channels: State | Mapping[str, Any], config: RunnableConfig | None = None) -> State:
    """The state decide works from, validated as LangGraph would (``trace`` stays empty), each
    value once (``reads``); a ``State`` built by hand (the unit tests) is taken as it is."""
    return read(State, channels, Channels, config)


def decide(state: State | Channels, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Sync body: call the bound model with the bounded prompt, for at most the active
    seconds left in the budget (the call runs on a worker thread that is abandoned then)."""
    state, opened = opened_run(state_of(state, config), config, deps)
    if opened.get("stop_reason"):
        return opened
    replay, known = deps.protocol.replay, RUNS.of(config)
    messages = build_messages(state, deps.system, deps.policy, replay, known)
    started, left = time.monotonic(), seconds_left(state, deps)
    if left <= 0:
        return opened | out_of_time(state, started, deps)
    with tracing.chat(deps.spans, config) as span:
        try:
            asked = model_config(config, deps.answer_streams, deps.secrets)
            if deps.middleware is None:
                message = paid = call_within(lambda: deps.bound.invoke(messages, asked), left)
            else:
                hooks = deps.middleware
                message, paid = call_within(
                    lambda: hooks.call_model(deps, messages, config, asked), left
                )
        except DeadlinePassed:
            return opened | ended(deps, span, out_of_time(state, started, deps))
        except Exception as exc:  # any model failure becomes a stop reason, never a traceback
            return opened | ended(deps, span, failed(state, exc, started, deps.secrets))
        return joined(
            opened, decided(state, messages, message, started, deps, span=span, paid=paid)
        )


async def adecide(
    state: State | Channels, config: RunnableConfig, *, deps: NodeDeps
) -> dict[str, Any]:
    """Async body: the same, awaiting the model; the call is cancelled when time runs out."""
    state, opened = opened_run(state_of(state, config), config, deps)
    if opened.get("stop_reason"):
        return opened
    replay, known = deps.protocol.replay, RUNS.of(config)
    messages = build_messages(state, deps.system, deps.policy, replay, known)
    started, left = time.monotonic(), seconds_left(state, deps)
    if left <= 0:
        return opened | out_of_time(state, started, deps)
    with tracing.chat(deps.spans, config) as span:
        try:
            asked = model_config(config, deps.answer_streams, deps.secrets)
            if deps.middleware is None:
                message = paid = await await_within(deps.bound.ainvoke(messages, asked), left)
            else:
                calling = deps.middleware.acall_model(deps, messages, config, asked)
                message, paid = await await_within(calling, left)
        except DeadlinePassed:
            return opened | ended(deps, span, out_of_time(state, started, deps))
        except Exception as exc:
            return opened | ended(deps, span, failed(state, exc, started, deps.secrets))
        return joined(
            opened, decided(state, messages, message, started, deps, span=span, paid=paid)
        )


def opened_run(
    state: State, config: RunnableConfig, deps: NodeDeps
) -> tuple[State, dict[str, Any]]:
    """The state this decision works from and the update that opens its run (``opening``),
    with the trace carried on; when the run goes on after a cut-in, its budgets checked first
    (no node did), so a state that only looks like a waiting step buys no model call."""
    state, opened, unchecked = opening(state, deps.context)
    opened |= tracing.carry(deps.spans, state.traceparent, config)
    if not unchecked:
        return state, opened
    held = Limits(deps.policy, state.extensions)
    usage = held_to_spend(state.usage, state.spend[state.spend_from :])
    over = enforce_before_step(held, usage, config)
    opened |= held.update()
    if held.granted:
        opened["trace"] = [*opened.get("trace", []), *held.entries()]
    return state, opened | over.update() if over is not None else opened


def joined(opened: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """The run's opening and the reply, both of which may write messages: one write."""
    if "messages" not in opened or "messages" not in update:
        return opened | update
    before, new = opened["messages"], update["messages"]
    if isinstance(before, Overwrite):
        return opened | update | {"messages": Overwrite([*before.value, *new])}
    return opened | update | {"messages": [*before, *new]}


def ended(deps: NodeDeps, span: Span, update: dict[str, Any]) -> dict[str, Any]:
    """A stop the model call caused, recorded on its span too."""
    tracing.chat_failed(deps.spans, span, update["stop_reason"], update["message"])
    return update


def seconds_left(state: State, deps: NodeDeps) -> float:
    """The active seconds the budget still allows: a model call gets no more than these."""
    return limits_of(deps.policy, state.extensions).max_seconds - state.usage.seconds


def out_of_time(state: State, started: float, deps: NodeDeps) -> dict[str, Any]:
    """The update when the budget ran out while the model was still thinking."""
    usage = spent(state, started)
    budget = limits_of(deps.policy, state.extensions).max_seconds
    stop = Stop(
        StopReason.MAX_SECONDS,
        message=f"max_seconds {budget:g} reached while waiting for the model "
        f"({usage.seconds:.2f} active seconds spent)",
    )
    return {**stop.update(), "usage": dump(usage), "reply": None}


def spent(state: State, started: float) -> Usage:
    """Usage after one more model call that took the time since ``started``; its cost never
    below the run's record of spend (``held_to_spend``)."""
    usage = held_to_spend(state.usage, state.spend[state.spend_from :])
    return usage.model_copy(
        update={
            "steps": usage.steps + 1,
            "seconds": state.usage.seconds + (time.monotonic() - started),
        }
    )


def decided(
    state: State,
    messages: list[BaseMessage],
    message: BaseMessage,
    started: float,
    deps: NodeDeps,
    *,
    span: Span | None = None,
    paid: BaseMessage | None = None,
) -> dict[str, Any]:
    """The update after a reply: the raw reply and the budget it used, priced (and recorded on
    the call's span); a reply whose text streams joins the conversation here. ``paid`` carries
    what the model calls cost when middleware made the reply (it may have called the model more
    than once, or rewritten what it said)."""
    usage = spent(state, started)
    paid = message if paid is None else paid
    reported = reported_tokens(paid)
    cost = deps.pricer.cost(reported) if reported is not None else None
    if span is not None:
        tracing.replied(deps.spans, span, (messages, message), reported, cost)
    tokens, estimated = _tokens(messages, paid, reported)
    usage.tokens = _added(usage.tokens, tokens)
    if estimated:
        usage.estimated_tokens = _added(usage.estimated_tokens, tokens)
    if reported is None:  # an estimate counts for max_tokens, never for money
        usage.cost, usage.unpriced = None, f"a reply of {deps.pricer.model} {NO_USAGE}"
    else:
        usage.cached_tokens = _added(usage.cached_tokens, reported.cached)
        usage.input_tokens = _added(usage.input_tokens, reported.input)
        usage.output_tokens = _added(usage.output_tokens, reported.output)
        usage.cost = add_cost(usage.cost, cost)
        usage.unpriced = usage.unpriced or deps.pricer.unpriced
    reply = reply_of(message, deps.secrets)
    spend = [cost if reported else None]
    update: dict[str, Any] = {"reply": dump(reply), "usage": dump(usage), "spend": spend}
    if deps.answer_streams and reply.text.strip():
        # Its text may have streamed: in the conversation from this step on, under the id it
        # streamed with, so no values event a chat client reads drops it (validate adds the
        # calls under the same id, finish the answer).
        update["messages"] = [said(reply.text, reply.id, reply)]
    return update


NO_USAGE = (
    "reported no usable token counts (a client that streams sends them only when asked: "
    "create the chat model with stream_usage=True)"
)
"""Why a reply is unpriced when it said nothing of its tokens, with the usual fix: ``ChatOpenAI``
with a ``base_url`` streams without usage unless ``stream_usage=True``."""


def reply_of(message: BaseMessage, secrets: tuple[str, ...] = ()) -> Reply:
    """The reply as state stores it: text cleaned (and the client's key masked, should a server
    echo it), and a tool call whose arguments no store could hold moved to
    ``invalid_tool_calls`` with the reason (the contract says bad_json)."""
    calls, invalid = [], []
    for c in getattr(message, "tool_calls", []):
        name = plain(c["name"], secrets=secrets)
        try:
            args = plain(c["args"], secrets=secrets)
            calls.append({"name": name, "args": args, "id": plain(c.get("id"), secrets=secrets)})
        except Unstorable as exc:
            invalid.append({"name": name, "args": None, "error": str(exc)})
    invalid += [
        {key: plain(c.get(key), secrets=secrets) for key in ("name", "args", "error")}
        for c in getattr(message, "invalid_tool_calls", [])
    ]
    text = message.text if isinstance(message.text, str) else str(message.content)
    return Reply(
        id=message.id,
        text=clean_text(text, secrets),
        tool_calls=calls,
        invalid_tool_calls=invalid,
        **metadata_of(message, secrets),
    )


def failed(
    state: State, exc: Exception, started: float, secrets: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The update after a failed call: the step and seconds still count."""
    usage = spent(state, started)
    if isinstance(exc, MiddlewareFailed):
        stop = Stop(StopReason.MIDDLEWARE_ERROR, exc.name, redact(str(exc), *secrets))
    else:
        stop = classify(exc, *secrets)
    return {**stop.update(), "usage": dump(usage), "reply": None}


TOKEN_CAP = 10**15
"""The most one token count holds. A larger report is capped here, not refused, so it still
ends a run under ``max_tokens``; no store holds more than 64 bits, JSON clients 53 exactly."""


def reported_count(value: Any) -> int | None:
    """A count as a provider reported it, if it is one: a non-negative integer, capped at
    ``TOKEN_CAP``; None for anything else (missing, negative, a float, a string, a bool), which
    must never lower what a run has spent."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return min(value, TOKEN_CAP)


def _added(total: int, more: int) -> int:
    return min(total + more, TOKEN_CAP)


def reported_tokens(message: BaseMessage) -> Tokens | None:
    """The reply's tokens by class, as the provider reported them; None when it reported none,
    a count that is not one, or 0 input and 0 output tokens (no model call costs nothing):
    such a reply is estimated for ``max_tokens`` and unpriced for ``max_cost``, never cheap."""
    reported = message.usage_metadata if isinstance(message, AIMessage) else None
    if not reported:
        return None
    found = (
        reported_count(reported.get("input_tokens")),
        reported_count(reported.get("output_tokens")),
    )
    inputs = _details(reported.get("input_token_details"), _INPUT_CLASSES)
    outputs = _details(reported.get("output_token_details"), _OUTPUT_CLASSES)
    if found[0] is None or found[1] is None or inputs is None or outputs is None:
        return None
    if not found[0] and not found[1]:
        return None
    read, written, heard = inputs
    written = min(written, found[0] - min(read, found[0]))
    return Tokens(
        input=found[0],
        cached=min(read, found[0]),
        output=found[1],
        cache_write=written,
        input_audio=min(heard, found[0]),
        output_audio=min(outputs[0], found[1]),
        reasoning=min(outputs[1], found[1]),
    )


_INPUT_CLASSES = ("cache_read", "cache_creation", "audio")
_OUTPUT_CLASSES = ("audio", "reasoning")


def _details(details: Any, keys: tuple[str, ...]) -> tuple[int, ...] | None:
    """The counts of one ``*_token_details`` mapping (absent ones 0); None if one is no count."""
    if details is None:
        return (0,) * len(keys)
    if not isinstance(details, Mapping):
        return None
    counts = tuple(reported_count(details.get(key, 0)) for key in keys)
    return None if None in counts else tuple(c for c in counts if c is not None)


def _tokens(
    messages: list[BaseMessage], message: BaseMessage, reported: Tokens | None
) -> tuple[int, bool]:
    """The reply's tokens and whether they are an estimate: the reported total (never less
    than its input and output), else an estimate, so ``max_tokens`` binds whatever the reply
    says about itself."""
    usage = message.usage_metadata if isinstance(message, AIMessage) else None
    total = reported_count(usage.get("total_tokens")) if usage else None
    if total:
        parts = reported.input + reported.output if reported is not None else 0
        return max(total, min(parts, TOKEN_CAP)), False
    return count_tokens_approximately([*messages, message]), True
