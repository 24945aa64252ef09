"""execute: run the approved call with its argument check, timeout and retries.

If this node is the first thing a resumed run does, an earlier attempt may have run the tool
before the process died. Only an idempotent tool is run again; any other stops the run with
``tool_outcome_unknown`` (or asks a human, when the policy puts the tool under approval).
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.runnables import RunnableConfig

from gated_react._engine import tool_runner
from gated_react._engine.approval import ask
from gated_react._engine.deps import NodeDeps
from gated_react._engine.langgraph_internals import is_resuming
from gated_react._engine.storable import error_text
from gated_react.state import Call, CoreState, Outcome, dump
from gated_react.stops import Stop, StopReason


def execute(state: CoreState, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Sync body."""
    call, early = prepare(state, config, deps)
    if early is not None:
        return early
    tool = deps.tools[call.tool]
    started = time.monotonic()
    try:
        value = tool_runner.invoke(tool, _args(deps, call), config, *_limits(deps, call))
    except Exception as exc:
        return completed(state, deps, call, started, error=exc)
    return completed(state, deps, call, started, value=value)


async def aexecute(state: CoreState, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Async body."""
    call, early = prepare(state, config, deps)
    if early is not None:
        return early
    tool = deps.tools[call.tool]
    started = time.monotonic()
    try:
        value = await tool_runner.ainvoke(tool, _args(deps, call), config, *_limits(deps, call))
    except Exception as exc:
        return completed(state, deps, call, started, error=exc)
    return completed(state, deps, call, started, value=value)


def prepare(
    state: CoreState, config: RunnableConfig, deps: NodeDeps
) -> tuple[Call, dict[str, Any] | None]:
    """The call to run, or an update that settles it without running the tool."""
    call = state.call
    if call is None or call.outcome is not None:
        raise TypeError("execute runs only after gate recorded a call without an outcome")
    if is_resuming(config) and not deps.idempotent(call.tool):
        unknown = _outcome_unknown(deps, call)
        if unknown is not None:
            return call, unknown
    problem = tool_runner.check_args(deps.tools[call.tool], call.args)
    if problem is not None:
        why = Stop(StopReason.TOOL_BAD_ARGS, call.tool, problem)
        return call, settle(deps, call, Outcome(ok=False, observation=problem, error=str(why)), why)
    return call, None


def _outcome_unknown(deps: NodeDeps, call: Call) -> dict[str, Any] | None:
    question = (
        f"{call.tool} may already have run before the process stopped; its outcome is unknown"
    )
    if call.tool in deps.policy.require_approval:
        decision = ask(
            {
                "kind": "outcome_unknown",
                "tool": call.tool,
                "args": call.args,
                "step": call.step,
                "why": question + ". Approve to run it again.",
            }
        )
        if decision.approved:
            return None
    stop = Stop(StopReason.TOOL_OUTCOME_UNKNOWN, call.tool, question)
    return {
        **stop.update(),
        "call": dump(call.model_copy(update={"outcome": Outcome(ok=False, error=str(stop))})),
    }


def _args(deps: NodeDeps, call: Call) -> dict[str, Any]:
    return {**call.args, tool_runner.KEY_PARAM: call.key} if call.tool in deps.keyed else call.args


def _limits(deps: NodeDeps, call: Call) -> tuple[float, int]:
    retries = deps.policy.tool_retries if deps.idempotent(call.tool) else 0
    return deps.policy.timeout_for(call.tool), retries


def completed(
    state: CoreState,
    deps: NodeDeps,
    call: Call,
    started: float,
    *,
    value: Any = None,
    error: Exception | None = None,
) -> dict[str, Any]:
    """Record the outcome (a value, a timeout or an error) and the seconds it took. A tool that
    returns an exception object returned a value: only a raised one is an error."""
    seconds = time.monotonic() - started
    usage = dump(state.usage.model_copy(update={"seconds": state.usage.seconds + seconds}))
    limit = deps.policy.max_observation_chars
    if isinstance(error, tool_runner.ToolTimeout):
        why = Stop(StopReason.TOOL_TIMEOUT, call.tool, str(error))
    elif error is not None:
        text = f"{type(error).__name__}: {error_text(error, *deps.secrets)}"[:500]
        why = Stop(StopReason.TOOL_ERROR, call.tool, f"{call.tool} failed: {text}")
    else:
        observation = tool_runner.to_observation(value, limit, deps.secrets)
        outcome = Outcome(ok=True, observation=observation)
        return {"call": dump(call.model_copy(update={"outcome": outcome})), "usage": usage}
    outcome = Outcome(ok=False, observation=why.message, error=str(why))
    return {**settle(deps, call, outcome, why), "usage": usage}


def settle(deps: NodeDeps, call: Call, outcome: Outcome, why: Stop) -> dict[str, Any]:
    """A failed call: the run stops, or (``on_tool_error="observe"``) the model sees the error."""
    update: dict[str, Any] = {"call": dump(call.model_copy(update={"outcome": outcome}))}
    if deps.policy.on_tool_error == "stop":
        update.update(why.update())
    return update
