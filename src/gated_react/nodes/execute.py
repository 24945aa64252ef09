"""execute: run the approved calls with their argument checks, timeouts and retries; the calls
of a reply with several run at once, each with its own timeout and idempotency key.

If this node is the first thing a resumed run does, an earlier attempt may have run the tools
before the process died. Only an idempotent tool is run again; any other stops the run with
``tool_outcome_unknown`` (or asks a human, when the policy puts the tool under approval).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.runnables import RunnableConfig

from gated_react._engine import tool_runner, tracing
from gated_react._engine.approval import ask, question
from gated_react._engine.deps import NodeDeps
from gated_react._engine.langgraph_internals import is_resuming
from gated_react._engine.storable import error_text
from gated_react.state import Call, CoreState, Outcome, dump
from gated_react.stops import Stop, StopReason

Ran = tuple[int, Any, Exception | None]
"""A finished call: its place in ``state.calls``, its value, or the error it raised."""


def execute(state: CoreState, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Sync body: one call runs here, several on threads of their own."""
    linked = tracing.carry(deps.spans, state.traceparent, config)
    calls, early = prepare(state, config, deps)
    if early is not None:
        return linked | early
    started = time.monotonic()
    todo = [i for i, call in enumerate(calls) if call.outcome is None]
    if len(todo) == 1:
        ran = [run_one(deps, calls, todo[0], config)]
    else:
        with ThreadPoolExecutor(max_workers=len(todo)) as pool:
            jobs = [
                pool.submit(contextvars.copy_context().run, run_one, deps, calls, i, config)
                for i in todo
            ]
            ran = [job.result() for job in jobs]
    return linked | completed(state, deps, calls, ran, started)


async def aexecute(state: CoreState, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Async body: the calls are awaited together."""
    linked = tracing.carry(deps.spans, state.traceparent, config)
    calls, early = prepare(state, config, deps)
    if early is not None:
        return linked | early
    started = time.monotonic()
    todo = [i for i, call in enumerate(calls) if call.outcome is None]
    ran = await asyncio.gather(*(arun_one(deps, calls, i, config) for i in todo))
    return linked | completed(state, deps, calls, list(ran), started)


def run_one(deps: NodeDeps, calls: list[Call], index: int, config: RunnableConfig) -> Ran:
    call = calls[index]
    with tracing.tool(deps.spans, config, call) as span:
        try:
            value = tool_runner.invoke(
                deps.tools[call.tool], _args(deps, call), config, *_limits(deps, call)
            )
        except Exception as exc:
            tracing.tool_failed(deps.spans, span, exc)
            return index, None, exc
        tracing.tool_done(deps.spans, span, value)
    return index, value, None


async def arun_one(deps: NodeDeps, calls: list[Call], index: int, config: RunnableConfig) -> Ran:
    call = calls[index]
    with tracing.tool(deps.spans, config, call) as span:
        try:
            tool = deps.tools[call.tool]
            args = _args(deps, call)
            value = await tool_runner.ainvoke(tool, args, config, *_limits(deps, call))
        except Exception as exc:
            tracing.tool_failed(deps.spans, span, exc)
            return index, None, exc
        tracing.tool_done(deps.spans, span, value)
    return index, value, None


def prepare(
    state: CoreState, config: RunnableConfig, deps: NodeDeps
) -> tuple[list[Call], dict[str, Any] | None]:
    """The calls with what is known before anything runs (refusals, bad arguments), or an
    update that settles the step without running a tool."""
    calls = list(state.calls)
    if not any(call.outcome is None for call in calls):
        raise TypeError("execute runs only after gate recorded a call without an outcome")
    if is_resuming(config):
        for index, call in enumerate(calls):
            if call.outcome is None and not deps.idempotent(call.tool):
                unknown = _outcome_unknown(deps, calls, call)
                if isinstance(unknown, Outcome):
                    calls[index] = _with(call, unknown)
                elif unknown is not None:
                    return calls, unknown
    for index, call in enumerate(calls):
        problem = None if call.outcome else tool_runner.check_args(deps.tools[call.tool], call.args)
        if problem is not None:
            why = Stop(StopReason.TOOL_BAD_ARGS, call.tool, problem)
            calls[index] = _with(call, Outcome(ok=False, observation=problem, error=str(why)))
            if deps.policy.on_tool_error == "stop":
                return calls, {"calls": [dump(c) for c in calls], **why.update()}
    if all(call.outcome is not None for call in calls):
        return calls, {"calls": [dump(c) for c in calls]}
    return calls, None


def _outcome_unknown(
    deps: NodeDeps, calls: list[Call], call: Call
) -> dict[str, Any] | Outcome | None:
    """The stop (or, under approval, the human's answer: run it again, None; or what came of
    it, an outcome) for a call that may have run before a crash."""
    why = f"{call.tool} may already have run before the process stopped; its outcome is unknown"
    if call.tool in deps.policy.require_approval:
        allowed = ("approve", "reject", "respond")
        asked = question("outcome_unknown", call.tool, call.args, call.step, why, allowed=allowed)
        asked["why"] = why + ". Approve to run it again, or respond with what came of it."
        decision = ask(asked)
        if decision.response is not None:
            return Outcome(ok=True, observation=decision.response, by_human=True)
        if decision.approved:
            return None
    stop = Stop(StopReason.TOOL_OUTCOME_UNKNOWN, call.tool, why)
    marked = [_with(c, Outcome(ok=False, error=str(stop))) if c is call else c for c in calls]
    return {**stop.update(), "calls": [dump(c) for c in marked]}


def _with(call: Call, outcome: Outcome) -> Call:
    return call.model_copy(update={"outcome": outcome})


def _args(deps: NodeDeps, call: Call) -> dict[str, Any]:
    return {**call.args, tool_runner.KEY_PARAM: call.key} if call.tool in deps.keyed else call.args


def _limits(deps: NodeDeps, call: Call) -> tuple[float, int]:
    retries = deps.policy.tool_retries if deps.idempotent(call.tool) else 0
    return deps.policy.timeout_for(call.tool), retries


def completed(
    state: CoreState, deps: NodeDeps, calls: list[Call], ran: list[Ran], started: float
) -> dict[str, Any]:
    """Record each outcome (a value, a timeout or an error) and the seconds the step took. A
    tool that returns an exception object returned a value: only a raised one is an error. With
    ``on_tool_error="stop"`` the first failed call, in the reply's order, stops the run."""
    seconds = time.monotonic() - started
    usage = dump(state.usage.model_copy(update={"seconds": state.usage.seconds + seconds}))
    first_failure: Stop | None = None
    for index, value, error in sorted(ran, key=lambda item: item[0]):
        outcome, why = _outcome(deps, calls[index], value, error)
        calls[index] = _with(calls[index], outcome)
        first_failure = first_failure or why
    update: dict[str, Any] = {"calls": [dump(c) for c in calls], "usage": usage}
    if first_failure is not None and deps.policy.on_tool_error == "stop":
        update.update(first_failure.update())
    return update


def _outcome(
    deps: NodeDeps, call: Call, value: Any, error: Exception | None
) -> tuple[Outcome, Stop | None]:
    if isinstance(error, tool_runner.ToolTimeout):
        why = Stop(StopReason.TOOL_TIMEOUT, call.tool, str(error))
    elif error is not None:
        text = f"{type(error).__name__}: {error_text(error, *deps.secrets)}"[:500]
        why = Stop(StopReason.TOOL_ERROR, call.tool, f"{call.tool} failed: {text}")
    else:
        limit = deps.policy.max_observation_chars
        return Outcome(
            ok=True, observation=tool_runner.to_observation(value, limit, deps.secrets)
        ), None
    return Outcome(ok=False, observation=why.message, error=str(why)), why
