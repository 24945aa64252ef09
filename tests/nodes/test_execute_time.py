"""execute under ``max_seconds``: a tool call gets only the seconds the run has left (shared
by the calls of a step, which run at once and each count their own), and one cut off when
they run out ends the run ``max_seconds`` (or, under ``on_budget="ask"``, leaves the next
decision to ask for more time)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import BaseTool, StructuredTool, tool

from gated_react._engine import deadline
from gated_react._engine.authority.ledger import ledger_for
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.langgraph_internals import CONFIG_KEY_CHECKPOINTER
from gated_react.errors import Unrecorded
from gated_react.nodes.execute import aexecute, execute
from gated_react.nodes.gate import gate
from gated_react.testing import ScriptedChatModel
from gated_react.tools._meta import idempotent

from ..support.helpers import QUESTION_ID, node_deps, policy, state
from ..support.reaping import PATIENCE
from .hand import THREAD, applied, ending, proposal, records, saved, usage

LEFT = 0.05
"""The seconds a run in these tests has left when its call starts."""


def _waiting(released: threading.Event) -> list[BaseTool]:
    """``hangs``, a tool that returns only once ``released`` is set (sync and native async)."""

    def hangs(n: int = 0) -> str:
        released.wait(PATIENCE)
        return "returned"

    async def ahangs(n: int = 0) -> str:
        await asyncio.sleep(PATIENCE)  # cancelled when the call is cut off
        return "returned"

    sync = StructuredTool.from_function(func=hangs, name="hangs", description="Hangs.")
    native = StructuredTool.from_function(
        func=hangs, coroutine=ahangs, name="hangs", description="Hangs."
    )
    return [sync, native]


def _spent(config: Any, tool: str, seconds: float) -> None:
    """The run has already spent ``seconds`` (an earlier call's beat says so)."""
    (permit, *_) = [r for r in records(config) if r.kind is Kind.PERMIT]
    body = {"call": "earlier", "tool": tool, "seconds": seconds, "attempt": "a"}
    earlier = Record(THREAD, QUESTION_ID, Kind.RUNNING, permit.key + "-earlier", body)
    ledger_for(config["configurable"][CONFIG_KEY_CHECKPOINTER]).append([earlier])


def _gated(
    tool: BaseTool, calls: int = 1, hooks: Sequence[AgentMiddleware] = (), left: float = LEFT,
    **fields: Any,
) -> tuple[dict[str, Any], Any, Any]:  # fmt: skip
    """The state after the gate let ``calls`` calls of ``tool`` through, with ``left`` seconds
    of the run's 20 left, its config and deps."""
    fields = {"max_seconds": 20.0, "tool_timeout_seconds": PATIENCE, **fields}
    parts = node_deps(ScriptedChatModel(replies=[]), [tool], policy(**fields), list(hooks))
    config = saved()
    asked = proposal(*[(tool.name, {"n": n}) for n in range(calls)])
    current = state(messages=[asked["message"]], calls=asked["calls"])
    after = applied(current, gate(current, config, deps=parts))
    assert ending(after) is None, after
    _spent(config, tool.name, 20.0 - left)
    return after, config, parts


def _execute(body: str, after: dict[str, Any], config: Any, parts: Any) -> dict[str, Any]:
    if body == "sync":
        return execute(after, config, deps=parts)
    return asyncio.run(aexecute(after, config, deps=parts))


def _hung(
    body: str = "sync", native: int = 0, hooks: Sequence[AgentMiddleware] = (), calls: int = 1,
    **fields: Any,
) -> tuple[dict[str, Any], Any]:  # fmt: skip
    """execute's update for ``calls`` calls of ``hangs`` (released once it is over), and its
    config."""
    released = threading.Event()
    after, config, parts = _gated(_waiting(released)[native], calls, hooks, **fields)
    try:
        return _execute(body, after, config, parts), config
    finally:
        released.set()


@pytest.mark.parametrize(("body", "native"), [("sync", 0), ("async", 0), ("async", 1)])
def test_a_tool_call_is_cut_off_when_the_runs_time_runs_out(body: str, native: int) -> None:
    """Before: a call got its tool's timeout whatever the run had left (a 30 s tool in an 8 s
    budget ran 30 s, and the run showed 30/8). Now it gets the seconds left, and the run ends
    ``max_seconds`` when they run out, naming the call it cut off."""
    update, config = _hung(body, native)
    stop = ending(update)
    assert stop["reason"] == "max_seconds", stop
    assert stop["message"].startswith("max_seconds 20 reached: hangs was cut off")
    # a sync tool's thread cannot be stopped: the stop says it may still finish
    assert ("may still finish" in stop["message"]) is (native == 0)
    done = records(config)[-1]
    assert (done.kind, done.body["ok"]) == ("done", False)
    assert usage(config).seconds >= 20.0  # what the cut-off call took is counted


def test_a_call_cut_off_stops_the_run_even_where_tool_errors_are_observed() -> None:
    """A tool's failure is shown to the model under ``on_tool_error="observe"``; the run's time
    running out is not the tool's failure, and the run ends."""
    update, _ = _hung(on_tool_error="observe")
    assert ending(update)["reason"] == "max_seconds"


def test_where_the_policy_asks_a_call_cut_off_leaves_the_next_decision_to_ask() -> None:
    """Under ``on_budget="ask"`` the step ends with the call answered (cut off), and the run
    goes on to the decision that asks a human for more time (it does not end here)."""
    update, _ = _hung(on_budget="ask")
    assert ending(update) is None
    (answer,) = update["messages"]
    assert answer.status == "error"
    assert "hangs was cut off" in answer.text


def test_a_call_with_time_to_spare_keeps_its_own_timeout() -> None:
    """A tool's own timeout, shorter than what the run has left, is still the tool's:
    ``tool_timeout``, not ``max_seconds``."""
    update, _ = _hung(tool_timeout_seconds=0.01)
    assert ending(update)["reason"] == "tool_timeout:hangs"


@idempotent
@tool
def failing(n: int = 0) -> str:
    """Fails at once, every time."""
    raise RuntimeError("upstream 503")


@pytest.mark.parametrize("body", ["sync", "async"])
def test_no_retry_waits_past_the_runs_time_and_the_tools_error_is_kept(body: str) -> None:
    """Before: a retry waited its backoff whatever the run had left (a run of 8 s ended at
    10.6 s), then said the call was "cut off", and the tool's own error was lost. Now a retry
    whose wait would end past the run's time is not made: the call fails with its error."""
    after, config, parts = _gated(failing, tool_retries=10)
    update = _execute(body, after, config, parts)
    stop = ending(update)
    assert stop["reason"] == "tool_error:failing", stop
    assert "upstream 503" in stop["message"]


class _SlowHook(AgentMiddleware):
    """A tool hook that waits before it runs the call (a rate limiter, say)."""

    def __init__(self, released: threading.Event) -> None:
        super().__init__()
        self.released = released

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.released.wait(PATIENCE)
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        await asyncio.sleep(PATIENCE)  # cancelled when the run's time is spent
        return await handler(request)


@pytest.mark.parametrize("body", ["sync", "async"])
def test_a_tool_hook_spends_the_runs_time_too(body: str) -> None:
    """Before: a hook that waited 8 s ran 8 s of a 2 s budget (only the tool inside it was
    timed). Now the hooks and the call run in the run's time, and are cut off together."""
    released = threading.Event()
    try:
        update, _ = _hung(body, hooks=[_SlowHook(released)])
    finally:
        released.set()
    stop = ending(update)
    assert stop["reason"] == "max_seconds", stop
    assert "hangs was cut off" in stop["message"]
    assert ("may still finish" in stop["message"]) is (body == "sync")  # a thread runs on


@pytest.mark.parametrize("body", ["sync", "async"])
def test_calls_at_once_together_spend_no_more_than_the_run_has_left(body: str) -> None:
    """Before: each call took its share as it started, the first alone all that was left, so
    three hung calls counted 9.17 s of a 5 s budget. Now each has its share from the step's
    start, and together they take what was left (and what the cut itself takes: under a
    loaded machine a tenth of a second and more, so the second left keeps the two apart)."""
    update, config = _hung(body, calls=3, left=1.0, max_parallel_calls=3)
    assert ending(update)["reason"] == "max_seconds"
    assert usage(config).seconds < 20.0 + 0.4  # before: 19.0 + 1.0 * (1 + 1/2 + 1/3)


@pytest.mark.parametrize(("body", "native"), [("sync", 0), ("async", 0), ("async", 1)])
@pytest.mark.parametrize("retried", [False, True])
def test_a_call_whose_time_the_store_cannot_record_is_abandoned(
    body: str, native: int, retried: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a beat the store could not take was skipped and the call went on, so a worker
    whose database connection was cut let the call run unrecorded and the retried job run it
    again (26.8 s of tool time under an 8 s budget). Now the wait ends at the first beat that
    cannot be written, as a crash would end it: nothing more is recorded here, and the run
    goes on from its record when it is resumed."""
    monkeypatch.setattr(deadline, "BEAT_SECONDS", 0.01)
    released, started = threading.Event(), []
    tool = _waiting(released)[native]
    tool.func = _counted(tool.func, started)
    retries = {"tool_retries": 3} if retried else {}  # an idempotent call is not run again
    tool.metadata = {"idempotent": True} if retried else None
    after, config, parts = _gated(tool, left=20.0, **retries)
    ledger = ledger_for(config["configurable"][CONFIG_KEY_CHECKPOINTER])

    append, aappend = ledger.append, ledger.aappend

    def lost(more: list[Record]) -> None:  # cut once the call is under way
        if any(r.kind is Kind.RUNNING for r in more):
            raise OSError("server closed the connection unexpectedly")
        append(more)

    async def alost(more: list[Record]) -> None:
        if any(r.kind is Kind.RUNNING for r in more):
            raise OSError("server closed the connection unexpectedly")
        await aappend(more)

    monkeypatch.setattr(ledger, "append", lost)
    monkeypatch.setattr(ledger, "aappend", alost)
    kept = len(records(config))
    try:
        with pytest.raises(Unrecorded, match="could not record how long hangs has taken"):
            _execute(body, after, config, parts)
        assert not released.is_set()  # it did not wait for the call to return
    finally:
        released.set()
    monkeypatch.undo()
    claimed = [] if retried else [Kind.STARTED]
    assert [r.kind for r in records(config)[kept:]] == claimed  # no done: as after a crash
    assert len(started) <= 1  # never run again here (an async one never reaches its func)


def _counted(func: Any, started: list[int]) -> Any:
    def counted(n: int = 0) -> str:
        started.append(1)
        return str(func(n))

    return counted
