"""Calls that must return by a deadline: tool calls within their timeout, model calls within
the seconds left in the run's budget.

Sync calls run on reusable daemon threads, so a call that hangs past its deadline is abandoned
without keeping the process alive at exit (``concurrent.futures`` joins its threads at exit) and a
quick call pays no thread start. Async calls are awaited and cancelled at the deadline (or when
their caller is cancelled), given ``STOPPING_SECONDS`` to end, and then left to end on their own:
a cancelled model call ends at once and its record is written before the run goes on (nothing of
the run outlives it on a connection its app may close), while a call that ignores its
cancellation holds its caller that long at most.

A caller may ask for a ``beat`` every ``BEAT_SECONDS`` while it waits: the runs record how long a
call has taken so far, so a process killed in the middle of a long call leaves its seconds
counted, all but the last beat's worth. A call that returns sooner costs no beat. A beat that
raises (``Unrecorded``: the store could not say) ends the wait: the call is abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from gated_react.errors import GatedReactError

T = TypeVar("T")
Later = Callable[[], float]
"""Asked when a wait's seconds have passed: how many more it may take (none when 0 or less;
a call's share of a run's time grows as the calls beside it end)."""

BEAT_SECONDS = 1.0
"""How often a waiting caller's ``beat`` runs: at most this much of a call's time is lost with
a process killed while it waits."""

STOPPING_SECONDS = 1.0
"""How long a cancelled async call is waited for (its cleanup) before it is left running."""


class DeadlinePassed(GatedReactError, TimeoutError):
    """The call had not returned by its deadline (it may still be running on its thread)."""


Job = tuple[Callable[[], None], Callable[[], None]]
"""A call to run on a worker, and what tells its caller that it is done."""


class _DaemonThreads:
    """Daemon worker threads, started on demand, reused, and retired after a minute idle."""

    def __init__(self, idle_seconds: float = 60.0) -> None:
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()
        self._idle_seconds = idle_seconds

    def submit(self, work: Callable[[], None], then: Callable[[], None]) -> None:
        with self._lock:
            reuse = self._idle > 0
            if reuse:
                self._idle -= 1  # claim an idle worker; it takes the job from the queue
        if reuse:
            self._jobs.put((work, then))
        else:
            # Handed over in a list the worker empties: a Thread keeps its args until it ends.
            threading.Thread(
                target=self._work, args=([(work, then)],), name="gated-react-call", daemon=True
            ).start()

    def _work(self, first: list[Job]) -> None:
        job: Job | None = first.pop()
        while job is not None:
            work, then = job
            job = None
            try:
                work()
            except BaseException:
                then()  # its caller hears now; this worker ends
                raise
            # Counted idle before its caller hears, so the caller's next call takes this worker:
            # heard first, a caller that called again at once could find no worker idle yet and
            # start another thread, which then idled for a minute.
            with self._lock:
                self._idle += 1
            then()
            # An idle worker must not keep the finished call (its tool, args and the run's
            # config, hence the graph) alive until the next job or its retirement.
            del work, then
            job = self._next()

    def _next(self) -> Job | None:
        """The next job, or None when this worker retires after its idle time."""
        while True:
            try:
                return self._jobs.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # no claim is waiting for this worker: retire
                        self._idle -= 1
                        return None


_THREADS = _DaemonThreads()


def call_within(
    call: Callable[[], T], seconds: float, beat: Callable[[], None] | None = None,
    later: Later | None = None,
) -> T:  # fmt: skip
    """``call()`` on a worker thread (in a copy of this context); its result or its exception,
    or ``DeadlinePassed`` after ``seconds`` (and what ``later`` adds); ``beat()`` every
    ``BEAT_SECONDS`` until then."""
    # A lock the worker releases when it is done: an Event is a Condition with a lock of its
    # own, and building and waiting on it cost more than the rest of the handoff.
    done = threading.Lock()
    done.acquire()
    box = _start(call, done.release)
    if not _waited(done, seconds, beat, later):
        raise DeadlinePassed(f"no result within {seconds:g} s")
    result: T = _unbox(box)
    return result


def _waited(
    done: threading.Lock, seconds: float, beat: Callable[[], None] | None, later: Later | None
) -> bool:
    """Whether ``done`` was released within ``seconds`` (and what ``later`` adds), beating
    while it was not."""
    end = time.monotonic() + max(seconds, 0.0)
    while True:
        left = end - time.monotonic()
        wait = min(max(left, 0.0), BEAT_SECONDS if beat is not None else threading.TIMEOUT_MAX)
        if done.acquire(timeout=wait):
            return True
        if beat is None or left <= BEAT_SECONDS:  # the end came: it may have moved
            more = 0.0 if later is None else later()
            if more <= 0:
                return False
            end = time.monotonic() + more
        else:
            beat()


async def acall_within(
    call: Callable[[], T], seconds: float, beat: Callable[[], Awaitable[None]] | None = None,
    later: Later | None = None,
) -> T:  # fmt: skip
    """Async ``call_within``: the event loop waits, the sync call runs on a worker thread."""
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()

    def resolve() -> None:
        if not finished.done():
            finished.set_result(None)

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # loop closed: nobody waits any more
            loop.call_soon_threadsafe(resolve)

    box = _start(call, wake)
    await await_within(finished, seconds, beat, later)
    result: T = _unbox(box)
    return result


async def await_within(
    awaitable: Awaitable[T], seconds: float, beat: Callable[[], Awaitable[None]] | None = None,
    later: Later | None = None,
) -> T:  # fmt: skip
    """``awaitable``'s result, or ``DeadlinePassed`` after ``seconds`` (and what ``later``
    adds); ``await beat()`` every ``BEAT_SECONDS`` until then. At the deadline it is cancelled
    and left to end on its own: one that is slow to stop (or will not) holds nobody up."""
    task = asyncio.ensure_future(awaitable)
    beating = None if beat is None else _Beats(beat)
    waits = (task,) if beating is None else (task, beating.lost)
    try:
        wait = seconds
        while True:
            timeout = None if wait == math.inf else max(wait, 0.0)
            done, _ = await asyncio.wait(waits, timeout=timeout, return_when="FIRST_COMPLETED")
            if task in done:
                return task.result()
            if beating is not None and beating.lost in done:
                await _stopped(task)
                beating.lost.result()  # raises the beat's Unrecorded
            wait = 0.0 if later is None else later()
            if wait <= 0:
                break
    except asyncio.CancelledError:  # the caller is cancelled: so is its call
        await _stopped(task)
        raise
    finally:
        if beating is not None:
            await beating.stop()
    await _stopped(task)
    raise DeadlinePassed(f"no result within {seconds:g} s")


_ABANDONED: set[asyncio.Future[Any]] = set()
"""Calls cancelled and not ended in ``STOPPING_SECONDS``: held until they end (a task nobody
holds can be collected while it runs)."""


async def _stopped(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait ``STOPPING_SECONDS`` for it to end, then leave it running."""
    task.cancel()
    try:
        await asyncio.wait((task,), timeout=STOPPING_SECONDS)
    finally:  # cancelled again while it waits, too
        if task.done():
            _ended(task)
        else:
            _ABANDONED.add(task)
            task.add_done_callback(_ended)


def _ended(task: asyncio.Future[Any]) -> None:
    _ABANDONED.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: its failure after the deadline is nobody's to hear


class _Beats:
    """``beat()`` as a task of its own every ``BEAT_SECONDS``, from a timer on the running loop
    (a call that returns sooner costs one timer, not a second task to wait on). ``lost`` ends
    with the error of a beat that failed (``Unrecorded``): its waiter stops waiting."""

    def __init__(self, beat: Callable[[], Awaitable[None]]) -> None:
        self._beat, self._loop = beat, asyncio.get_running_loop()
        self._task: asyncio.Task[None] | None = None
        self._timer = self._loop.call_later(BEAT_SECONDS, self._fire)
        self.lost: asyncio.Future[None] = self._loop.create_future()

    def _fire(self) -> None:
        if self._task is None or self._task.done():  # one beat at a time
            self._task = asyncio.ensure_future(self._beat())
            self._task.add_done_callback(self._heard)
        self._timer = self._loop.call_later(BEAT_SECONDS, self._fire)

    def _heard(self, task: asyncio.Task[None]) -> None:
        error = None if task.cancelled() else task.exception()
        if error is not None and not self.lost.done():
            self.lost.set_exception(error)

    async def stop(self) -> None:
        """No more beats; one under way ends first (its record lands before the call's end)."""
        self._timer.cancel()
        if self._task is not None:
            await asyncio.wait((self._task,))
        if self.lost.done():
            self.lost.exception()  # heard, or too late to matter: the call had ended
        else:
            self.lost.cancel()


def _start(call: Callable[[], Any], on_done: Callable[[], None]) -> list[tuple[bool, Any]]:
    box: list[tuple[bool, Any]] = []
    context = contextvars.copy_context()

    def work() -> None:
        try:
            box.append((True, context.run(call)))
        except BaseException as exc:  # handed to the caller's thread, which decides
            box.append((False, exc))

    _THREADS.submit(work, on_done)
    return box


def _unbox(box: list[tuple[bool, Any]]) -> Any:
    ok, value = box[0]
    if not ok:
        raise value
    return value
