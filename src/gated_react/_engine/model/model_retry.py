"""A model call retried through errors that pass: one retry loop, in sync and async twins.

A server that answers 429, 500, 502, 503 or 504, refuses or drops the connection, or lets a read
time out is often back within seconds: the call is tried again after an exponential, jittered
wait (longer if the server's ``Retry-After`` asks for it), as long as attempts are left and the
wait ends before the deadline (the seconds left in the run's time budget). Every other failure
(400, 401, 403, a context too long, a quota used up, a reply that is no completion) is final
and raised at once, as is the deadline (``DeadlinePassed``). Errors are told apart by
``model_errors.classify``, the one reading of a model exception.

Two callbacks make the retries visible and countable: ``on_retry`` before each retry (a log
warning: "model call retried after 503, attempt 2 of 3, waiting 1.2 s"), ``on_paid`` after
each attempt a provider may bill: one that returned a reply, and one whose reply was lost after
the request reached the server (a read timeout, a connection dropped mid-reply, a call still
running at the deadline).
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gated_react._engine.deadline import DeadlinePassed, await_within, call_within
from gated_react._engine.model.model_errors import classify
from gated_react.errors import Unrecorded, causes
from gated_react.stops import StopReason

T = TypeVar("T")

FIRST_WAIT = 0.5
"""Seconds before the first retry (before jitter); each later wait doubles, up to ``MAX_WAIT``."""
MAX_WAIT = 8.0
"""The longest wait this module chooses; a server's ``Retry-After`` may ask for more."""
_PASSING_STATUS = frozenset({429, 500, 502, 503, 504})
_PASSING_KINDS = frozenset({"rate_limited", "server_error", "connection"})
# A failure in these never reached the server: nothing was sent, nothing can be billed.
_BEFORE_SENDING = frozenset({"ConnectError", "ConnectTimeout", "PoolTimeout"})


@dataclass(frozen=True, slots=True)
class Retry:
    """A retry about to happen: what ``on_retry`` hears."""

    attempt: int
    """The attempt about to start (2 for the first retry)."""
    attempts: int
    """The most attempts the call may make."""
    wait: float
    """Seconds waited before it."""
    after: str
    """What failed: an HTTP status (``503``), ``a timeout`` or ``a connection error``."""
    error: BaseException
    """The failure itself."""

    @property
    def message(self) -> str:
        """The run log's sentence."""
        return (
            f"model call retried after {self.after}, attempt {self.attempt} of "
            f"{self.attempts}, waiting {self.wait:.1f} s"
        )


@dataclass(frozen=True, slots=True)
class Paid(Generic[T]):
    """An attempt a provider may bill: what ``on_paid`` hears."""

    attempt: int
    """Which attempt (1 for the first)."""
    reply: T | None
    """What it returned; None when its reply was lost after the request reached the server
    (or may have: a call cut off by the deadline)."""


@dataclass(frozen=True, slots=True)
class Retries:
    """How a call is retried."""

    seconds: float
    """The deadline: seconds the call may take, retries and waits included."""
    retries: int = 2
    """Attempts after the first (``Policy.model_retries``)."""
    on_retry: Callable[[Retry], None] | None = None
    """Told before each retry."""
    on_paid: Callable[[Paid[Any]], None] | None = None
    """Told after each attempt that may be billed."""


class _Plan:
    """One call's attempts: what the sync and async loops share but the awaited call."""

    def __init__(self, retries: Retries) -> None:
        self.retries = retries
        self.deadline = time.monotonic() + retries.seconds
        self.attempt = 1

    def left(self) -> float:
        """Seconds the next attempt may take; ``DeadlinePassed`` when none are left."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed(f"no result within {self.retries.seconds:g} s")
        return left

    def cut_off(self) -> None:
        """The deadline passed while an attempt ran: its reply, if any, is lost."""
        self._paid(None)

    def replied(self, reply: T) -> T:
        self._paid(reply)
        return reply

    def failed(self, error: Exception) -> float:
        """The wait before the next attempt; ``error`` is raised when it is final, when no
        attempt is left, or when the wait would end past the deadline."""
        if lost_reply(error):
            self._paid(None)
        wait = self._wait(error)
        if wait is None or self.attempt > self.retries.retries:
            raise error
        if time.monotonic() + wait >= self.deadline:
            raise error
        self.attempt += 1
        if self.retries.on_retry is not None:
            after = _after(error)
            total = self.retries.retries + 1
            self.retries.on_retry(Retry(self.attempt, total, wait, after, error))
        return wait

    def _wait(self, error: Exception) -> float | None:
        if not transient(error):
            return None
        chosen = jittered(self.attempt, FIRST_WAIT, MAX_WAIT)
        asked = retry_after(error)
        return chosen if asked is None else max(chosen, asked)

    def _paid(self, reply: Any) -> None:
        if self.retries.on_paid is not None:
            self.retries.on_paid(Paid(self.attempt, reply))


def call_model(call: Callable[[], T], retries: Retries) -> T:
    """``call()``'s reply, retried as ``retries`` says; each attempt runs on a worker thread
    and is abandoned at the deadline (``deadline.call_within``)."""
    return _attempts(_Plan(retries), lambda left: call_within(call, left))


def retried(call: Callable[[], T], retries: Retries) -> T:
    """``call_model`` for a call already held to its deadline by its caller (a model call
    inside a node body that runs on a worker thread): each attempt runs here."""
    return _attempts(_Plan(retries), lambda _left: call())


def _attempts(plan: _Plan, attempt: Callable[[float], T]) -> T:
    while True:
        left = plan.left()
        try:
            reply = attempt(left)
        except DeadlinePassed:
            plan.cut_off()
            raise
        except Exception as error:
            time.sleep(plan.failed(error))
            continue
        return plan.replied(reply)


async def acall_model(call: Callable[[], Awaitable[T]], retries: Retries) -> T:
    """Async ``call_model``: each attempt is awaited and cancelled at the deadline."""
    return await _aattempts(_Plan(retries), lambda left: await_within(call(), left))


async def aretried(call: Callable[[], Awaitable[T]], retries: Retries) -> T:
    """Async ``retried``."""
    return await _aattempts(_Plan(retries), lambda _left: call())


async def _aattempts(plan: _Plan, attempt: Callable[[float], Awaitable[T]]) -> T:
    while True:
        left = plan.left()
        try:
            reply = await attempt(left)
        except DeadlinePassed:
            plan.cut_off()
            raise
        except Exception as error:
            await asyncio.sleep(plan.failed(error))
            continue
        return plan.replied(reply)


def billed(error: BaseException) -> bool:
    """Whether a failed attempt may have been billed: a reply lost after the request reached
    the server, or one that came and could not be read. An error the server answered with
    (any HTTP status) and a request that never left are not."""
    if isinstance(getattr(error, "status_code", None), int):
        return False
    if _BEFORE_SENDING.intersection(type(cause).__name__ for cause in causes(error)):
        return False
    return not transient(error) or lost_reply(error)


def transient(error: BaseException) -> bool:
    """Whether ``error`` may pass if the call is tried again: 429 (unless the quota is used
    up), 500, 502, 503, 504, a lost or refused connection, a timeout; never when the server
    says not to (``x-should-retry: false``) or the context is too long."""
    if isinstance(error, DeadlinePassed | Unrecorded):  # the run's own time, or its store
        return False
    stop = classify(error)
    status = getattr(error, "status_code", None)
    if _header(error, "x-should-retry") == "false" or stop.detail == "context_length":
        return False
    if isinstance(status, int):
        quota = str(getattr(error, "code", "") or "") == "insufficient_quota"
        return status in _PASSING_STATUS and stop.detail in _PASSING_KINDS and not quota
    return stop.reason is StopReason.LLM_TIMEOUT or stop.detail == "connection"


def lost_reply(error: BaseException) -> bool:
    """A timeout or a lost connection after the request was sent: the server may have
    answered (and billed) a reply that never arrived."""
    if isinstance(error, DeadlinePassed) or isinstance(getattr(error, "status_code", None), int):
        return False
    if not transient(error):
        return False
    return not _BEFORE_SENDING.intersection(type(cause).__name__ for cause in causes(error))


def retry_after(error: BaseException) -> float | None:
    """The seconds a server asked to wait (``retry-after-ms``, ``retry-after`` in seconds or
    as a date), or None."""
    milliseconds = _number(_header(error, "retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000
    text = _header(error, "retry-after")
    seconds = _number(text)
    if seconds is not None or text is None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def jittered(attempt: int, first: float, cap: float) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): ``first`` doubled per
    attempt, at most ``cap``, and a random half of it shaved off, so calls that failed together
    do not come back together."""
    base: float = min(first * 2 ** (attempt - 1), cap)
    return base / 2 + random.uniform(0, base / 2)


def _after(error: BaseException) -> str:
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return str(status)
    return "a timeout" if classify(error).reason is StopReason.LLM_TIMEOUT else "a connection error"


def _header(error: BaseException, name: str) -> str | None:
    headers = getattr(getattr(error, "response", None), "headers", None)
    value = None if headers is None else headers.get(name)
    return value.strip().lower() if isinstance(value, str) else None


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) and value >= 0 else None
