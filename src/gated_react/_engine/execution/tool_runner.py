"""Running one tool call: timeout, retries, and a JSON-safe, bounded result (its arguments are
checked before, in ``tool_args``).

Sync tools run on the deadline module's daemon threads, so a call that hangs past its timeout
is abandoned without keeping the process alive.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import GraphInterrupt
from langgraph.types import Command
from pydantic import BaseModel

from gated_react._engine.deadline import (
    DeadlinePassed,
    acall_within,
    await_within,
    call_within,
)
from gated_react._engine.model.model_retry import jittered
from gated_react._engine.storable import Unstorable, clean_text, plain
from gated_react.errors import GatedReactError, Unrecorded


class ToolTimeout(GatedReactError):
    """The tool did not return within its timeout."""


_RUNS_ON = (
    "; it runs on in its thread (a call made synchronously cannot be stopped) and may still finish"
)
"""What a call cut off on a thread says: an operator must not read "it did not happen"."""


class TimeSpent(ToolTimeout):
    """The run's ``max_seconds`` ran out while the tool ran (or before a retry): cut off, not
    retried. ``seconds``: how long the call had taken."""

    def __init__(self, tool: str, seconds: float, *, runs_on: bool = False) -> None:
        said = f"{tool} was cut off {seconds:.2f} s into the call, when the run's time ran out"
        if runs_on:  # a thread cannot be stopped: an operator must not read "it did not happen"
            said += _RUNS_ON
        super().__init__(said)
        self.seconds = seconds


class CallChanged(GatedReactError):
    """A middleware's tool hook tried to run a call other than the one the gate let through
    (another tool, other arguments, or a non-idempotent tool a second time): it never runs."""


class RunAgain(CallChanged):
    """A tool hook asked to run a call that is not idempotent a second time: it ran once, and
    does not run again."""


class ToolCommand(GatedReactError):
    """The tool returned a ``Command``: a state update, which only the graph's nodes write."""


class ToolPaused(GatedReactError):
    """The tool called LangGraph's ``interrupt()`` (or ran a graph that did): a gated run does
    not pause inside a tool. On resume the tool would run again from its start, and nothing
    tells that resume from the one after a crash, so a tool that is not idempotent could run
    twice, or run on after a crash as if the answer had just come."""


class ToolExit(GatedReactError):
    """The tool raised ``SystemExit`` (or another non-error exit): a failed call, never the
    end of the process that runs the agent."""


def _contained(exc: BaseException, tool: BaseTool) -> BaseException:
    """Errors pass through; a tool's exit is turned into an error. Ctrl-C and cancellation
    still propagate: they are the user's, not the tool's."""
    if isinstance(exc, Exception | KeyboardInterrupt | asyncio.CancelledError):
        return exc
    return ToolExit(f"{tool.name} raised {type(exc).__name__}: {str(exc)[:200]}")


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1-based) of a tool: exponential, jittered."""
    return jittered(attempt, 0.1, 5.0)


def invoke(
    tool: BaseTool, args: dict[str, Any], config: RunnableConfig, timeout: float, retries: int,
    *, beat: Callable[[], None] | None = None, until: Callable[[], float] = lambda: math.inf,
) -> Any:  # fmt: skip
    """Run the tool (sync), retrying ``retries`` times; raises ToolTimeout or the tool's error.
    ``beat()`` runs every ``deadline.BEAT_SECONDS`` while an attempt is under way. ``until()``
    (``time.monotonic()``'s clock) is when the run's time runs out (later as the calls beside
    this one end): no attempt runs past it, and no retry waits past it."""
    began = time.monotonic()
    for attempt in range(retries + 1):
        try:
            once = _invoke_once(tool, args, config, timeout, beat=beat, began=began, until=until)
            return returned(tool, once)
        except (TimeSpent, Unrecorded):  # the run's time, or the store, is gone
            raise
        except Exception:
            wait = backoff(attempt + 1)
            if attempt == retries or time.monotonic() + wait >= until():
                raise
            time.sleep(wait)
    raise AssertionError("unreachable")


async def ainvoke(
    tool: BaseTool, args: dict[str, Any], config: RunnableConfig, timeout: float, retries: int,
    *, beat: Callable[[], Awaitable[None]] | None = None,
    until: Callable[[], float] = lambda: math.inf,
) -> Any:  # fmt: skip
    """Async twin of ``invoke``; natively async tools are awaited, sync ones run on a thread."""
    began = time.monotonic()
    for attempt in range(retries + 1):
        try:
            once = _ainvoke_once(tool, args, config, timeout, beat=beat, began=began, until=until)
            return returned(tool, await once)
        except (TimeSpent, Unrecorded):  # the run's time, or the store, is gone
            raise
        except Exception:
            wait = backoff(attempt + 1)
            if attempt == retries or time.monotonic() + wait >= until():
                raise
            await asyncio.sleep(wait)
    raise AssertionError("unreachable")


def returned(tool: BaseTool, value: Any) -> Any:
    """What a call returned; a ``ToolMessage`` (what a tool invoked with a full ``ToolCall``
    returns) is kept whole: its artifact is the conversation's (``tool_results``)."""
    if isinstance(value, Command):
        raise ToolCommand(
            f"{tool.name} returned a Command; gated-react's state is written by its nodes "
            "only: return the data instead"
        )
    return value


def _within(tool: BaseTool, timeout: float, began: float, until: Callable[[], float]) -> float:
    """The seconds an attempt may take: its timeout, or what is left of the run's time."""
    left = until() - time.monotonic()
    if left <= 0:
        raise TimeSpent(tool.name, time.monotonic() - began)
    return min(timeout, left)


def _later(end: float, until: Callable[[], float]) -> float:
    """The seconds more an attempt cut short by the run's time may take: those its share
    gained (the calls beside it ended), up to its own timeout's end."""
    return min(end, until()) - time.monotonic()


def _timed_out(
    tool: BaseTool, timeout: float, started: float, began: float, until: Callable[[], float],
    *, threaded: bool,
) -> ToolTimeout:  # fmt: skip
    """What an attempt cut off says: the run's time ran out, when that came before the
    tool's timeout (and whether the call runs on, on its thread)."""
    if until() < started + timeout:
        return TimeSpent(tool.name, time.monotonic() - began, runs_on=threaded)
    said = f"{tool.name} did not return within {timeout:g} s"
    return ToolTimeout(said + _RUNS_ON if threaded else said)


def _invoke_once(
    tool: BaseTool, args: dict[str, Any], config: RunnableConfig, timeout: float,
    *, beat: Callable[[], None] | None, began: float, until: Callable[[], float],
) -> Any:  # fmt: skip
    started = time.monotonic()
    within = _within(tool, timeout, began, until)
    later = partial(_later, started + timeout, until)
    try:
        return call_within(lambda: _call(tool, args, config), within, beat, later)
    except DeadlinePassed:
        raise _timed_out(tool, timeout, started, began, until, threaded=True) from None
    except GraphInterrupt:
        raise _paused(tool) from None


async def _ainvoke_once(
    tool: BaseTool, args: dict[str, Any], config: RunnableConfig, timeout: float,
    *, beat: Callable[[], Awaitable[None]] | None, began: float, until: Callable[[], float],
) -> Any:  # fmt: skip
    started = time.monotonic()
    within = _within(tool, timeout, began, until)
    later = partial(_later, started + timeout, until)
    try:
        if _is_async(tool):
            return await await_within(tool.ainvoke(args, config), within, beat, later)
        return await acall_within(lambda: _call(tool, args, config), within, beat, later)
    except DeadlinePassed:
        threaded = not _is_async(tool)
        raise _timed_out(tool, timeout, started, began, until, threaded=threaded) from None
    except GraphInterrupt:
        raise _paused(tool) from None


def _paused(tool: BaseTool) -> ToolPaused:
    return ToolPaused(
        f"{tool.name} called interrupt(), which a gated run does not take inside a tool; ask "
        f"before the call instead: Policy(require_approval={{{tool.name!r}}})"
    )


def _call(tool: BaseTool, args: dict[str, Any], config: RunnableConfig) -> Any:
    """The call a worker thread makes; a tool's exit becomes an error there."""
    try:
        if isinstance(tool, StructuredTool) and tool.func is None and tool.coroutine is not None:
            return asyncio.run(tool.ainvoke(args, config))  # an async-only tool under sync invoke
        return tool.invoke(args, config)
    except BaseException as exc:
        contained = _contained(exc, tool)
        if contained is exc:
            raise
        raise contained from None


def _is_async(tool: BaseTool) -> bool:
    if isinstance(tool, StructuredTool):
        return tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


def to_observation(value: Any, limit: int, secrets: tuple[str, ...] = ()) -> Any:
    """The tool's result as storable JSON data (``storable``), cut with a visible marker when
    its text exceeds ``limit``. Whatever a tool returns, this never raises."""
    data = storable(value, secrets)
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return data if len(text) <= limit else cut(text, limit)


def storable(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """Any value as plain JSON data (``storable.plain``: nesting bounded, ``secrets``
    masked), else as text: JSON too deep to store, or ``repr`` for what JSON cannot encode
    (cycles included). The one bounded form of outside values the state and the spans share;
    never raises."""
    if type(value) is str:  # most results: the JSON round trip would give it back unchanged
        return clean_text(value, secrets)
    try:
        text = json.dumps(value, default=_jsonable, ensure_ascii=False)
        return plain(json.loads(text), secrets=secrets)
    except Unstorable:  # huge integers or deep nesting: the model reads the same JSON as text
        return clean_text(text, secrets)
    except Exception:  # circular, unencodable, too deep to encode, a __repr__ that raises
        return clean_text(_shown(value), secrets)


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a visible marker (unchanged when it fits)."""
    if len(text) <= limit:
        return text
    return text[:limit] + f" ...[cut: {len(text)} chars, first {limit} shown]"


def _shown(value: Any) -> str:
    try:
        return clean_text(repr(value))
    except Exception:
        return f"<{type(value).__name__} object that cannot be shown>"


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return repr(value)[:1000]
