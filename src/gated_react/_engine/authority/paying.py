"""Model calls, paid for in the record: each call is checked against the run's budgets and
recorded (``model``, at an estimate) before it is made, and recorded again with what it cost
(``paid``) when it returns. A call whose process died in between still counts, at its
estimate; a middleware that calls the model again pays again, under the same budgets.

What a reply says about its own usage is taken only when it is a count: a token count that is
not a non-negative integer is estimated, never trusted lower.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig

from gated_react._engine import deadline as beats
from gated_react._engine.authority.budgets import Limits
from gated_react._engine.authority.estimate import estimated_tokens
from gated_react._engine.authority.ledger import Book, Place
from gated_react._engine.authority.limits import check_before_step, check_thread_step
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.authority.waiting import unrecorded
from gated_react._engine.deadline import DeadlinePassed
from gated_react._engine.model.model_retry import (
    Retries,
    Retry,
    aretried,
    billed,
    lost_reply,
    retried,
)
from gated_react._engine.model.pricing import Tokens
from gated_react._engine.model.tokens import TOKEN_CAP, reported_count, reported_tokens
from gated_react.errors import GatedReactError
from gated_react.stops import Stop

if TYPE_CHECKING:  # the parts' type only: deps is built from the modules that use it
    from gated_react._engine.deps import NodeDeps

NO_USAGE = (
    "reported no usable token counts (a client that streams sends them only when asked: "
    "create the chat model with stream_usage=True)"
)
"""Why a reply is unpriced when it said nothing of its tokens, with the usual fix."""


class Called(NamedTuple):
    """What one decision's model call under the hooks gave."""

    reply: BaseMessage
    paid: BaseMessage
    rewritten: dict[str, tuple[Any, BaseMessage]]
    """By id, each message of the conversation a hook rewrote: what it held when shown to the
    hooks, and what they made of it."""


class BudgetSpent(GatedReactError):
    """A model call a budget no longer allows (a middleware calling the model again)."""

    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.message)
        self.stop = stop


@dataclass
class Meter:
    """The model calls of one decision, checked, recorded and retried through errors that
    pass (``model_retry``): each attempt is a model call of its own, recorded as one."""

    place: Place
    run: str
    deps: NodeDeps
    held: Limits
    deadline: float = math.inf
    """When (``time.monotonic``) the decision's calls must have ended: the run's time budget."""
    began: float = 0.0
    """When the decision started waiting on the model (what a call cut off at the deadline
    spent: all of the seconds the budget had left)."""
    attempt: tuple[Record, float] | None = None
    """The attempt under way: its ``model`` record and when it started."""
    resting: tuple[Record, float] | None = None
    """The attempt that failed last, and when: the wait before a retry is the model's time
    too, recorded as it passes (a ``running`` record of the wait: every beat, and when the next
    attempt starts)."""
    read: Book | None = None
    """The run's record as the decision read it just before its first call (no record it
    wrote since counts as spend): that call is checked against it, every later one against
    the record read again."""

    def call(
        self, invoke: Callable[[], BaseMessage], messages: Sequence[BaseMessage]
    ) -> BaseMessage:
        """``invoke()`` (one model call with ``messages``), checked, recorded and retried."""
        return retried(lambda: self._once(invoke, messages), self._retries())

    async def acall(
        self, invoke: Callable[[], Awaitable[BaseMessage]], messages: Sequence[BaseMessage]
    ) -> BaseMessage:
        """Async twin of ``call``."""
        return await aretried(lambda: self._aonce(invoke, messages), self._retries())

    def abandoned(self) -> Record | None:
        """The record of the attempt still under way when the deadline passed (its thread
        abandoned): its time counts, and it may have been paid."""
        if self.attempt is None:
            return None
        opened, started = self.attempt
        self.attempt = None
        return self.failed(opened, min(started, self.began or started), DeadlinePassed())

    def beat(self, *, cut: bool = False) -> None:
        """Record how long the attempt under way has taken so far (``deadline``'s beat): a
        process killed while it waits leaves those seconds counted. ``cut``: the wait was cut
        short (Ctrl-C, SIGTERM, a cancelled caller), and the attempt is settled at its seconds
        to the moment instead (``_cut``)."""
        record = self._cut() if cut else self._beat()
        if record is not None:
            try:
                self.place.ledger.append([record])
            except Exception as exc:  # the call's time would be free: its wait ends
                raise unrecorded("the model call", exc) from exc

    async def abeat(self, *, cut: bool = False) -> None:
        """Async twin of ``beat``."""
        record = self._cut() if cut else self._beat()
        if record is not None:
            try:
                await self.place.ledger.aappend([record])
            except Exception as exc:
                raise unrecorded("the model call", exc) from exc

    def _cut(self) -> Record | None:
        # A beat counts ahead (up to the next one), and figures about a call that is not paid
        # yet only rise: the attempt is settled as one that raised (at its estimate: it may
        # have been paid), so its seconds are those it took. Its thread, if it returns later,
        # finds it settled.
        attempt = self.attempt
        if attempt is None:
            return self._beat()
        self.attempt = None
        opened, started = attempt
        return self.failed(opened, started, KeyboardInterrupt())

    def _beat(self) -> Record | None:
        # a ``model`` record again: figures about a call that is not paid yet only rise, so
        # the seconds count until its ``paid`` record settles them; between attempts, the wait
        attempt, resting = self.attempt, self.resting  # read once: the call's thread sets them
        if attempt is None:
            return None if resting is None else _waited(resting)
        opened, started = attempt
        body = dict(opened.body, seconds=time.monotonic() - started + self._ahead())
        return Record(opened.thread, opened.run, Kind.MODEL, opened.key, body)

    def _ahead(self) -> float:
        """The seconds a call under way counts beyond those it has taken: up to its next beat
        (or the deadline, if sooner). A process killed before that beat leaves them counted,
        so a kill never makes time free; the ``paid`` record settles them."""
        return max(min(beats.BEAT_SECONDS, self.deadline - time.monotonic()), 0.0)

    def _rested(self) -> list[Record]:
        """The wait before this attempt, now that it is over (none after no failure)."""
        resting, self.resting = self.resting, None
        return [] if resting is None else [_waited(resting)]

    def _once(
        self, invoke: Callable[[], BaseMessage], messages: Sequence[BaseMessage]
    ) -> BaseMessage:
        ledger = self.place.ledger
        if waited := self._rested():
            ledger.append(waited)
        opened = self.before(messages)
        ledger.append([opened])
        started = self._start(opened)
        try:
            reply = invoke()
        except BaseException as error:
            with contextlib.suppress(Exception):  # the store may be what failed
                ledger.append([self.failed(opened, started, error)])
            self.resting = (opened, time.monotonic())
            raise
        finally:
            self.attempt = None
        ledger.append([self.paid(opened, messages, reply, started)])
        return reply

    async def _aonce(
        self, invoke: Callable[[], Awaitable[BaseMessage]], messages: Sequence[BaseMessage]
    ) -> BaseMessage:
        ledger = self.place.ledger
        if waited := self._rested():
            await ledger.aappend(waited)
        opened = await self.abefore(messages)
        await ledger.aappend([opened])
        started = self._start(opened)
        try:
            reply = await invoke()
        except BaseException as error:
            with contextlib.suppress(Exception):
                await ledger.aappend([self.failed(opened, started, error)])
            self.resting = (opened, time.monotonic())
            raise
        finally:
            self.attempt = None
        await ledger.aappend([self.paid(opened, messages, reply, started)])
        return reply

    def _start(self, opened: Record) -> float:
        started = time.monotonic()
        self.attempt = (opened, started)
        return started

    def _retries(self) -> Retries:
        seconds = self.deadline - time.monotonic()
        return Retries(seconds, self.deps.policy.model_retries, on_retry=_said)

    def before(self, messages: Sequence[BaseMessage]) -> Record:
        """The record of a call about to be made; ``BudgetSpent`` if the budgets say no."""
        book = self.read or self.place.ledger.book(self.place.thread, self.run)
        self.read = None
        return self._opened(
            book.tally.usage(), messages, self.place.whole(self.held.budget, tools=False)
        )

    async def abefore(self, messages: Sequence[BaseMessage]) -> Record:
        book = self.read or await self.place.ledger.abook(self.place.thread, self.run)
        self.read = None
        whole = await self.place.awhole(self.held.budget, tools=False)
        return self._opened(book.tally.usage(), messages, whole)

    def _opened(self, usage: Any, messages: Sequence[BaseMessage], whole: Book | None) -> Record:
        budget = self.held.budget
        over = check_before_step(usage, budget) or check_thread_step(
            None if whole is None else whole.tally.usage(), budget
        )
        if over is not None:
            raise BudgetSpent(over)
        estimate = min(estimated_tokens(messages), TOKEN_CAP)
        cost = self.deps.pricer.cost(Tokens(input=estimate, cached=0, output=0))
        body = {"tokens": estimate, "estimated": estimate, "input": estimate, "cost": cost,
                "unpriced": None if cost is not None else self.deps.pricer.unpriced,
                "seconds": self._ahead()}  # fmt: skip
        return self.place.record(self.run, Kind.MODEL, os.urandom(16).hex(), **body)

    def paid(self, opened: Record, messages: Sequence[BaseMessage], reply: BaseMessage,
             started: float) -> Record:  # fmt: skip
        """The record of what a call that returned cost."""
        seconds = time.monotonic() - started
        return Record(opened.thread, opened.run, Kind.PAID, opened.key,
                      spent(self.deps, messages, reply) | {"seconds": seconds})  # fmt: skip

    def failed(self, opened: Record, started: float, error: BaseException) -> Record:
        """The record of a call that raised: its time counts. One that may have been paid
        (a reply lost on its way back, or unreadable) keeps its estimate; one the server
        refused, or that never left, was not: it is no model call (``unbilled``)."""
        seconds = time.monotonic() - started
        if isinstance(error, Exception) and not billed(error):
            body: dict[str, Any] = {"unbilled": True, "seconds": seconds}
        elif isinstance(error, Exception) and lost_reply(error):
            # paid for, maybe, but no reply came: no decision was made, so no step (a retry
            # is sent even on a run's last step: a network blip is no policy stop)
            body = dict(opened.body, seconds=seconds, failed=True)
        else:
            body = dict(opened.body, seconds=seconds)
        return Record(opened.thread, opened.run, Kind.PAID, opened.key, body)


def _waited(resting: tuple[Record, float]) -> Record:
    """The wait since an attempt failed, so far: a ``running`` record of its own."""
    failed, since = resting
    body = {"seconds": time.monotonic() - since}
    return Record(failed.thread, failed.run, Kind.RUNNING, f"{failed.key}:wait", body)


def spent(deps: NodeDeps, messages: Sequence[BaseMessage], reply: BaseMessage) -> dict[str, Any]:
    """What a reply cost: its tokens (the reported total, never less than its input and
    output; else an estimate, which counts for ``max_tokens`` and never for money), its tokens
    by class and its price (unpriced when it reported no usable counts). Counts that are counts
    are taken as the server reports them: token and cost budgets hold on its numbers."""
    reported = reported_tokens(reply)
    usage = reply.usage_metadata if isinstance(reply, AIMessage) else None
    total = reported_count(usage.get("total_tokens")) if usage else None
    body: dict[str, Any]
    if total:
        parts = reported.input + reported.output if reported is not None else 0
        body = {"tokens": max(total, min(parts, TOKEN_CAP))}
    else:
        estimate = min(estimated_tokens([*messages, reply]), TOKEN_CAP)
        body = {"tokens": estimate, "estimated": estimate}
    if reported is None:
        return body | {"cost": None, "unpriced": f"a reply of {deps.pricer.model} {NO_USAGE}"}
    cost = deps.pricer.cost(reported)
    return body | {
        "input": reported.input, "output": reported.output, "cached": reported.cached,
        "cost": cost, "unpriced": None if cost is not None else deps.pricer.unpriced,
    }  # fmt: skip


def _said(retry: Retry) -> None:
    _LOG.warning("%s", retry.message)  # the workers' log and the CLI's stderr say it


_LOG = logging.getLogger("gated_react")


METER: contextvars.ContextVar[Meter | None] = contextvars.ContextVar(
    "gated_react_meter", default=None
)

"""The meter of the decision running on this thread or task: what a middleware's own model
calls are checked and recorded by (``Metered``)."""


class Metered(Runnable[Any, Any]):
    """A middleware's own model (``SummarizationMiddleware``'s summarizer): each call it makes
    inside a decision is checked against the run's budgets and recorded, as the decision's own
    call is. Outside a decision it is the model itself."""

    def __init__(self, inner: Runnable[Any, Any]) -> None:
        self.inner = inner

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        meter = METER.get()
        if meter is None:
            return self.inner.invoke(input, config, **kwargs)
        shown = _messages(input)
        return meter.call(lambda: self.inner.invoke(input, config, **kwargs), shown)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        meter = METER.get()
        if meter is None:
            return await self.inner.ainvoke(input, config, **kwargs)
        shown = _messages(input)
        return await meter.acall(lambda: self.inner.ainvoke(input, config, **kwargs), shown)


def _messages(input: Any) -> list[BaseMessage]:
    """What a model call is given, as messages (to estimate its tokens before it is paid)."""
    if isinstance(input, str):
        return [HumanMessage(input)]
    if isinstance(input, list):
        return [m if isinstance(m, BaseMessage) else HumanMessage(str(m)) for m in input]
    return [HumanMessage(str(input))]
