"""Calls within a deadline: the result, the call's own error, or ``DeadlinePassed`` in time."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import pytest

from gated_react._engine import deadline
from gated_react._engine.deadline import DeadlinePassed, acall_within, await_within, call_within

from ..support.reaping import PATIENCE


def test_a_call_returns_its_result_from_its_worker_thread() -> None:
    caller = threading.get_ident()
    assert call_within(threading.get_ident, PATIENCE) != caller
    assert call_within(lambda: "done", PATIENCE) == "done"


def test_calls_one_after_another_reuse_one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker counts itself idle before its caller hears that the call is done, so a
    # caller calling again at once never finds every worker busy and starts another. A pool
    # of its own: workers other tests of this process left idle would share the calls.
    monkeypatch.setattr(deadline, "_THREADS", deadline._DaemonThreads())
    workers = {call_within(threading.get_ident, PATIENCE) for _ in range(2000)}
    assert len(workers) == 1


def test_a_call_raises_its_own_error_in_the_caller() -> None:
    def fails() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        call_within(fails, PATIENCE)


def test_a_call_past_its_deadline_is_abandoned_with_deadline_passed() -> None:
    release = threading.Event()
    try:
        with pytest.raises(DeadlinePassed, match=r"no result within 0\.05 s"):
            call_within(lambda: release.wait(PATIENCE), 0.05)
    finally:
        release.set()  # the abandoned call ends, so its worker is free again


@pytest.mark.parametrize("seconds", [float("inf"), 1e300, 1e10])
def test_a_deadline_beyond_what_the_platform_can_wait_means_no_deadline(seconds: float) -> None:
    # A lock waits at most threading.TIMEOUT_MAX (292 years); more raised OverflowError.
    def slow() -> str:
        time.sleep(0.05)  # still running when the caller starts to wait
        return "late but fine"

    assert call_within(slow, seconds) == "late but fine"


def test_a_deadline_already_spent_abandons_the_call_which_still_runs() -> None:
    release, box = threading.Event(), []

    def work() -> None:
        release.wait(PATIENCE)
        box.append("ran")

    with pytest.raises(DeadlinePassed):
        call_within(work, -1.0)
    release.set()
    deadline = time.monotonic() + PATIENCE
    while not box and time.monotonic() < deadline:
        time.sleep(0.01)
    assert box == ["ran"]  # abandoned, not cancelled: a sync call cannot be stopped


def test_a_waiting_caller_beats_until_the_call_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that takes longer than a beat: the caller's beat runs while it waits (the run
    records the seconds so far), and stops when the result is in."""
    monkeypatch.setattr(deadline, "BEAT_SECONDS", 0.001)
    release, beats = threading.Event(), []

    def beat() -> None:
        beats.append(threading.get_ident())
        if len(beats) == 3:
            release.set()

    assert call_within(lambda: release.wait(PATIENCE) and "late", PATIENCE, beat) == "late"
    # on the caller's thread, the call's own; under load one more may come before the result
    assert len(beats) >= 3
    assert set(beats) == {threading.get_ident()}


def test_a_quick_call_costs_no_beat() -> None:
    beats: list[int] = []
    assert call_within(lambda: "quick", PATIENCE, lambda: beats.append(1)) == "quick"
    assert beats == []


def test_beats_end_with_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadline, "BEAT_SECONDS", 0.001)
    release, beats = threading.Event(), []
    try:
        with pytest.raises(DeadlinePassed):
            call_within(lambda: release.wait(PATIENCE), 0.05, lambda: beats.append(1))
    finally:
        release.set()
    assert beats  # it beat while it waited, then gave up at the deadline


def test_an_awaited_call_beats_until_it_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadline, "BEAT_SECONDS", 0.001)

    async def main() -> tuple[str, int]:
        release, beats = asyncio.Event(), []

        async def beat() -> None:
            beats.append(1)
            if len(beats) == 3:
                release.set()

        async def slow() -> str:
            await release.wait()
            return "late"

        return await await_within(slow(), PATIENCE, beat), len(beats)

    got, beats = asyncio.run(main())
    assert got == "late"
    assert beats >= 3  # released by the third; under load a fourth may come before it ends


def test_an_awaited_call_past_its_deadline_is_cancelled_between_beats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(deadline, "BEAT_SECONDS", 0.001)

    async def main() -> tuple[bool, int]:
        cancelled, beats = asyncio.Event(), []

        async def beat() -> None:
            beats.append(1)

        async def hangs() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

        with pytest.raises(DeadlinePassed, match=r"no result within 0\.05 s"):
            await await_within(hangs(), 0.05, beat)
        await asyncio.wait_for(cancelled.wait(), PATIENCE)  # delivered after the caller went on
        return cancelled.is_set(), len(beats)

    cancelled, beats = asyncio.run(main())
    assert cancelled
    assert beats > 0


def test_an_awaited_call_slow_to_stop_holds_nobody_up_past_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the caller waited for the cancelled call to end, so a call whose cleanup took 3
    s (or one that swallowed its cancellation: forever) held the run past its deadline. Now
    the call is given ``STOPPING_SECONDS`` and then left to end on its own, and what it does
    then is nobody's to hear."""
    monkeypatch.setattr(deadline, "STOPPING_SECONDS", 0.001)

    async def main() -> list[str]:
        stopping, release, seen = asyncio.Event(), asyncio.Event(), []

        async def stubborn() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                stopping.set()
                await release.wait()  # its cleanup, slow to end
                seen.append("cleaned up")

        with pytest.raises(DeadlinePassed):
            await await_within(stubborn(), 0.01)
        seen.append("caller went on")
        await asyncio.wait_for(stopping.wait(), PATIENCE)
        release.set()
        while len(seen) < 2:
            await asyncio.sleep(0)
        return seen

    assert asyncio.run(main()) == ["caller went on", "cleaned up"]


def test_a_wait_goes_on_for_as_long_as_later_says() -> None:
    """``later`` is asked at the end: the seconds more the call may take (a share of the
    run's time grows as the calls beside it end); none, and the wait is over."""
    release, asked = threading.Event(), []

    def later() -> float:
        asked.append(1)
        release.set()  # it returns within the extension
        return PATIENCE

    assert call_within(lambda: release.wait(PATIENCE) and "done", 0.01, None, later) == "done"
    assert asked == [1]
    hung = threading.Event()
    try:
        with pytest.raises(DeadlinePassed):
            call_within(lambda: hung.wait(PATIENCE), 0.01, None, lambda: 0.0)
    finally:
        hung.set()


def test_a_sync_call_awaited_beats_on_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadline, "BEAT_SECONDS", 0.001)
    release = threading.Event()

    async def main() -> tuple[str, int]:
        beats = []

        async def beat() -> None:
            beats.append(1)
            if len(beats) == 2:
                release.set()

        got = await acall_within(lambda: release.wait(PATIENCE) and "late", PATIENCE, beat)
        return got, len(beats)

    got, beats = asyncio.run(main())
    assert got == "late"  # released by the second beat (without beats: False, after PATIENCE)
    assert beats >= 2  # under load a third may come before the loop hears the call end


@pytest.mark.parametrize("cut", ["deadline", "caller cancelled"])
def test_a_cancelled_call_ends_its_cleanup_before_its_caller_goes_on(cut: str) -> None:
    """A model call's record of its cancelled attempt is written in its cleanup, on the run's
    connection. Before: the caller went on at once, so the run could end (and its app close
    the connection) while the cleanup was writing: "Explicit commit() forbidden within a
    Transaction context" from psycopg, in 6 of 10 runs of the Postgres test in
    ``tests/store/test_coalesced.py``."""

    async def main() -> list[str]:
        seen: list[str] = []
        started = asyncio.Event()

        async def model_call() -> None:
            try:
                started.set()
                await asyncio.Event().wait()
            finally:
                await asyncio.sleep(0)  # the record's write: a round trip
                await asyncio.sleep(0)
                seen.append("attempt recorded")

        async def caller() -> None:
            try:
                await await_within(model_call(), 0.01 if cut == "deadline" else PATIENCE)
            finally:
                seen.append("caller went on")

        running = asyncio.ensure_future(caller())
        await started.wait()
        if cut != "deadline":
            running.cancel()
        with contextlib.suppress(DeadlinePassed, asyncio.CancelledError):
            await running
        return seen

    assert asyncio.run(main()) == ["attempt recorded", "caller went on"]
