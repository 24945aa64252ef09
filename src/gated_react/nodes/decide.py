"""decide: ask the model once for the next action.

The run's budgets are checked first, against its record (a spent one stops the run, or asks a
human for more); the model call is recorded before it is made and when it returns, so every
paid call counts. A reply that calls tools joins the conversation here, as ``create_agent``'s
model node writes it; a final answer waits for ``finish``. A failing model call ends the run
with a stop reason, never with an exception.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, TypedDict

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from opentelemetry.trace import Span

from gated_react._engine.authority.budgets import Limits, enforce, opened_record, reopened
from gated_react._engine.authority.ledger import Book, Place
from gated_react._engine.authority.limits import LEAST_SECONDS, check_before_step, check_doubt
from gated_react._engine.authority.paying import BudgetSpent, Called, Meter
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.authority.started import started_calls, waiting_keys
from gated_react._engine.conversation.chat import proposal, proposed, reply_of, with_ids
from gated_react._engine.conversation.run_steps import run_call_ids
from gated_react._engine.conversation.step_channel import stored
from gated_react._engine.conversation.steps import ended, ending, joined, stale
from gated_react._engine.conversation.streaming import model_config, stream_calls
from gated_react._engine.conversation.transcript import build_messages
from gated_react._engine.conversation.turns import (
    Opened,
    cut_short,
    held_step,
    hooks_edits,
    opening,
    settled,
)
from gated_react._engine.deadline import DeadlinePassed, await_within, call_within
from gated_react._engine.deps import NodeDeps
from gated_react._engine.model.model_errors import classify
from gated_react._engine.model.tokens import reported_tokens
from gated_react._engine.observability import agent_spans, tracing
from gated_react.errors import MiddlewareFailed, Unrecorded
from gated_react.redact import redact
from gated_react.stops import Stop, StopReason


class DecideChannels(TypedDict, total=False):
    """The channels decide reads, as stored."""

    messages: list[Any]
    goal: str | None
    step: dict[str, Any] | None
    status: str | None
    stop_reason: str | None
    message: str | None


class Planned:
    """A decision before its model call: the run, its budgets, the request, the writes so far."""

    def __init__(self, opened: Opened, place: Place, deps: NodeDeps, held: Limits) -> None:
        self.opened, self.place, self.deps, self.held = opened, place, deps, held
        self.update: dict[str, Any] = dict(opened.update)
        self.records: list[Record] = []
        self.stale: dict[str, Any] = {}
        """Clears the previous run's end when this decision writes a message."""
        self.done: dict[str, Any] | None = None
        """The update when the decision ends before any model call (a spent budget)."""
        self.messages: list[BaseMessage] = []
        self.left = 0.0
        self.meter = Meter(place, opened.run, deps, held)


def decide(state: DecideChannels, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Sync body: the model is called for at most the active seconds left in the budget (on a
    worker thread that is abandoned then)."""
    place = Place.of(config)
    place.resumed(config)  # read the thread anew if it was deleted
    held = _held_run(state)
    unfinished = held is not None and place.ledger.book(place.thread, held).tally.ended is None
    opened = _opened(state, place, unfinished)
    if opened.new:
        place.ledger.renew(place.thread)
    book = place.ledger.book(place.thread, opened.run)
    found = place.ledger.about(_keys(state, opened))
    plan = _plan(state, opened, place, book=book, found=found, config=config, deps=deps)
    place.ledger.append(plan.records)
    if plan.done is not None:
        return plan.done
    asked = model_config(config, deps.answer_streams, deps.secrets)
    with tracing.chat(deps.spans, config) as span:
        began = time.monotonic()
        try:
            if deps.middleware is None:
                called = call_within(lambda: _plain(plan, asked), plan.left, plan.meter.beat)
            else:
                hooks = deps.middleware
                called = call_within(
                    lambda: hooks.call_model(deps, plan.messages, config, asked, plan.meter),
                    plan.left,
                    plan.meter.beat,
                )
        except Unrecorded:  # the store is gone: the step ends as a crash would end it
            raise
        except Exception as exc:
            place.ledger.append(_abandoned(plan, exc))
            return ended(_failed(plan, exc, began), deps, span)
        except BaseException:  # Ctrl-C, SIGTERM: the seconds the call has taken count
            with contextlib.suppress(Unrecorded):
                plan.meter.beat(cut=True)
            raise
        return _decided(plan, called, config, span)


async def adecide(
    state: DecideChannels, config: RunnableConfig, *, deps: NodeDeps
) -> dict[str, Any]:
    """Async body: the same, awaiting the model; the call is cancelled when time runs out."""
    place = Place.of(config)
    await place.aresumed(config)  # read the thread anew if it was deleted
    held = _held_run(state)
    unfinished = (
        held is not None and (await place.ledger.abook(place.thread, held)).tally.ended is None
    )
    opened = _opened(state, place, unfinished)
    if opened.new:
        await place.ledger.arenew(place.thread)
    book = await place.ledger.abook(place.thread, opened.run)
    found = await place.ledger.aabout(_keys(state, opened))
    plan = _plan(state, opened, place, book=book, found=found, config=config, deps=deps)
    await place.ledger.aappend(plan.records)
    if plan.done is not None:
        return plan.done
    asked = model_config(config, deps.answer_streams, deps.secrets)
    with tracing.chat(deps.spans, config) as span:
        began = time.monotonic()
        try:
            if deps.middleware is None:
                called = await await_within(_aplain(plan, asked), plan.left, plan.meter.abeat)
            else:
                hooks = deps.middleware
                calling = hooks.acall_model(deps, plan.messages, config, asked, plan.meter)
                called = await await_within(calling, plan.left, plan.meter.abeat)
        except Unrecorded:
            raise
        except Exception as exc:
            await place.ledger.aappend(_abandoned(plan, exc))
            return ended(_failed(plan, exc, began), deps, span)
        except BaseException:  # cancelled: the seconds the call has taken count
            with contextlib.suppress(Unrecorded):
                await plan.meter.abeat(cut=True)
            raise
        return _decided(plan, called, config, span)


def _abandoned(plan: Planned, exc: Exception) -> list[Record]:
    """The record of a model call the deadline cut off (its thread still waits on it)."""
    record = plan.meter.abandoned() if isinstance(exc, DeadlinePassed) else None
    return [] if record is None else [record]


def _plain(plan: Planned, asked: Any) -> Called:
    """One model call, with no hooks around it."""
    messages, bound = plan.messages, plan.deps.bound
    reply = plan.meter.call(lambda: bound.invoke(messages, asked), messages)
    return Called(reply, reply, {})


async def _aplain(plan: Planned, asked: Any) -> Called:
    messages, bound = plan.messages, plan.deps.bound
    reply = await plan.meter.acall(lambda: bound.ainvoke(messages, asked), messages)
    return Called(reply, reply, {})


def _opened(state: DecideChannels, place: Place, unfinished: bool) -> Opened:
    messages, goal, step = state.get("messages") or [], state.get("goal"), state.get("step")
    return opening(messages, goal, step, thread=place.thread, saved=place.saved,
                   unfinished=unfinished)  # fmt: skip


def _held_run(state: DecideChannels) -> str | None:
    """The run of the step in hand, when a goal arrives (whether it ended decides whether the
    same goal again is the same run)."""
    held = held_step(state.get("step")) if state.get("goal") is not None else None
    return held.run if held is not None else None


def _keys(state: DecideChannels, opened: Opened) -> list[str]:
    """What the record is asked about the calls an unfinished run left waiting."""
    if not opened.waiting:  # the common case: no step in hand to read
        return []
    return waiting_keys(held_step(state.get("step")), opened.waiting)


def _plan(
    state: DecideChannels,
    opened: Opened,
    place: Place,
    *,
    book: Book,
    found: list[Record],
    config: RunnableConfig,
    deps: NodeDeps,
) -> Planned:
    """The decision up to its model call: the run opened (an unfinished one cut short), the
    budgets checked (a spent one may ask a human), the request built."""
    plan = Planned(opened, place, deps, Limits(deps.policy, book.tally.extensions))
    deps.spans.note(config, place, opened.run)
    plan.stale = stale(state)
    if opened.new and book.tally.opened is None:
        plan.records.append(opened_record(place, opened.run, deps))
    else:
        plan.records += reopened(book, place, opened.run, deps)
    if opened.waiting:
        _cut_in(plan, state, found)
    usage = book.tally.usage()
    over = check_doubt(book.tally.doubted, plan.held.budget) or enforce(
        lambda budget: check_before_step(usage, budget), plan.held, usage, config, usage.steps
    )
    plan.records += plan.held.records(place.thread, opened.run)
    if over is not None:
        plan.done = plan.update | ending(opened.step, over)
        return plan
    plan.left = plan.held.budget.max_seconds - usage.seconds
    plan.meter.began, plan.meter.read = time.monotonic(), book
    plan.meter.deadline = plan.meter.began + plan.left
    if plan.left < LEAST_SECONDS:
        plan.done = plan.update | ending(opened.step, out_of_time(plan, usage.seconds))
        return plan
    last = plan.held.budget.max_steps - usage.steps == 1
    plan.messages = build_messages(
        opened.messages, opened.at, deps.system, deps.policy, deps.protocol.replay,
        retry=opened.step.retry, last_step=last,
    )  # fmt: skip
    return plan


def _cut_in(plan: Planned, state: DecideChannels, found: list[Record]) -> None:
    """End the unfinished run this decision's new message cut short: its waiting calls
    answered in the conversation (``found``: what the record says of them), its end recorded
    unless it has one (a fork of an ended run). (The same goal sent again while the run waits
    ends only the waiting step: its calls answered, the run going on.)"""
    opened, held = plan.opened, held_step(state.get("step"))
    started = started_calls(found, held, opened.waiting)
    if not opened.new:
        answers = settled(opened.waiting, started)
        plan.update["messages"] = answers
        opened.messages = [*opened.messages, *answers]
        return
    rewritten, at = cut_short(opened.messages, opened.at, opened.waiting, started)
    plan.update["messages"] = rewritten
    opened.messages, opened.at = list(rewritten.value), at
    old = held.run if held is not None else None
    if old is not None and not any(r.kind is Kind.ENDED and r.run == old for r in found):
        unknown = any(started.get(str(c.get("id")), "") is None for c in opened.waiting
                      if str(c.get("id")) in started)  # fmt: skip
        reason = StopReason.TOOL_OUTCOME_UNKNOWN if unknown else StopReason.TOOL_REJECTED
        said = "a new message came before its calls were settled"
        plan.records.append(plan.place.record(old, Kind.ENDED, old, reason=str(reason),
                                              message=said))  # fmt: skip


def out_of_time(plan: Planned, seconds: float) -> Stop:
    budget = plan.held.budget.max_seconds
    return Stop(
        StopReason.MAX_SECONDS,
        message=f"max_seconds {budget:g} reached ({seconds:.2f} active seconds spent)",
    )


def _failed(plan: Planned, exc: Exception, began: float) -> dict[str, Any]:
    """The update after a failed model call (what it cost is in the record already)."""
    secrets = plan.deps.secrets
    if isinstance(exc, DeadlinePassed):
        budget = plan.held.budget.max_seconds
        stop = Stop(
            StopReason.MAX_SECONDS,
            message=f"max_seconds {budget:g} reached while waiting for the model "
            f"({time.monotonic() - began:.2f} seconds into the call)",
        )
    elif isinstance(exc, BudgetSpent):
        stop = exc.stop
    elif isinstance(exc, MiddlewareFailed):
        stop = Stop(StopReason.MIDDLEWARE_ERROR, exc.name, redact(str(exc), *secrets))
    else:
        stop = classify(exc, *secrets)
    return plan.update | ending(plan.opened.step, stop)


def _decided(plan: Planned, called: Called, config: RunnableConfig, span: Span) -> dict[str, Any]:
    """The update after a reply: the reply handed to validate; its tool calls, if it makes
    any, in the conversation (``create_agent``'s model node writes them so), after the
    messages a hook rewrote (a redaction: stored as the model saw it, as ``create_agent``
    stores it)."""
    deps, message, paid = plan.deps, called.reply, called.paid
    if span.is_recording():  # the span alone shows them (the record has what was paid)
        reported = reported_tokens(paid)
        cost = deps.pricer.cost(reported) if reported is not None else None
        tracing.replied(deps.spans, span, (plan.messages, message), reported, cost)
    reply = reply_of(message, deps.secrets)
    actions = proposal(deps, reply)
    opened = plan.opened
    named, message_id = with_ids(actions, reply, run_call_ids(opened.messages, opened.at))
    if reply.tool_calls and len(named) == len(reply.tool_calls):  # validate names them alike
        calls = [dict(c, id=a.id) for c, a in zip(reply.tool_calls, named, strict=True)]
        reply = reply.model_copy(update={"tool_calls": calls})
    # the step's calls are the reply's, named by validate: none are kept from the step before;
    # it carries this invocation's trace context, for the next one on the thread to link to
    linked = agent_spans.carry(deps.spans, opened.step.traceparent, config)
    step = opened.step.model_copy(update={"reply": reply, "calls": [], "ending": None} | linked)
    update = plan.update | {"step": stored(step)}
    edits = hooks_edits(opened, called.rewritten)
    if edits:
        update = joined(update | plan.stale, edits)
    if not actions:
        return update
    text = reply.text if deps.protocol.answer_is_text else ""
    ai = proposed(named, text, message_id, reply)
    stream_calls(config, ai)
    return joined(update | plan.stale, [ai])
