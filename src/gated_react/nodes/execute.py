"""execute: run the approved calls with their argument checks, timeouts and retries; the calls
of a reply with several run at once, each with its own timeout and idempotency key.

If this node is the first thing a resumed run does, an earlier attempt may have run the tools
before the process died. Only an idempotent tool is run again; any other stops the run with
``tool_outcome_unknown`` (or asks a human, when the policy puts the tool under approval).

State is data an editor controls (Studio's edit-and-continue writes any channel), so no call
runs on the state's word alone. Every call is checked against the policy's allowlist here
again, always. And when this node starts from a checkpoint that no node wrote (an edit or a
fork, as LangGraph's own metadata records: ``came_from_an_edit``), its calls are not the gate's
decision: each goes through the gate's checks again (budgets from the record of the run's
calls, the allowlist, loops, and a human's approval asked here), as if the model had just
proposed it. A refused call stops the run with the gate's reason, traced.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.runnables import RunnableConfig

from gated_react._engine import tool_runner, tracing
from gated_react._engine.approval import answered_outcome, ask, question
from gated_react._engine.budget_checks import Limits, recorded
from gated_react._engine.call_keys import loop_key
from gated_react._engine.deps import NodeDeps
from gated_react._engine.langgraph_internals import (
    acame_from_an_edit,
    came_from_an_edit,
    is_resuming,
)
from gated_react._engine.storable import error_text
from gated_react.nodes.gate import Ledger, check, refuse
from gated_react.state import Call, CoreState, Outcome, ToolAction, Usage, dump
from gated_react.stops import Stop, StopReason

Ran = tuple[int, Any, Exception | None]
"""A finished call: its place in ``state.calls``, its value, or the error it raised."""


def execute(state: CoreState, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Sync body: one call runs here, several on threads of their own."""
    linked = tracing.carry(deps.spans, state.traceparent, config)
    state, calls, early, counted = prepare(state, config, deps, came_from_an_edit(config))
    if early is not None:
        return linked | counted | early
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
    return linked | counted | completed(state, deps, calls, ran, started)


async def aexecute(state: CoreState, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Async body: the calls are awaited together."""
    linked = tracing.carry(deps.spans, state.traceparent, config)
    state, calls, early, counted = prepare(state, config, deps, await acame_from_an_edit(config))
    if early is not None:
        return linked | counted | early
    started = time.monotonic()
    todo = [i for i, call in enumerate(calls) if call.outcome is None]
    ran = await asyncio.gather(*(arun_one(deps, calls, i, config) for i in todo))
    return linked | counted | completed(state, deps, calls, list(ran), started)


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
    state: CoreState, config: RunnableConfig, deps: NodeDeps, edited: bool = False
) -> tuple[CoreState, list[Call], dict[str, Any] | None, dict[str, Any]]:
    """The state and calls with what is known before anything runs (refusals, bad arguments),
    an update that settles the step without running a tool (or None), and the counters an
    edited state's calls were counted into (written with either)."""
    calls = list(state.calls)
    if not any(call.outcome is None for call in calls):
        raise TypeError("execute runs only after gate recorded a call without an outcome")
    counted: dict[str, Any] = {}
    for index, call in enumerate(calls):
        why = None if call.outcome else refuse(deps, call.tool)
        if why is not None:  # the allowlist holds whatever wrote the state
            return state, calls, _stopped_at(calls, index, _edited(why)), counted
    if edited:
        ledger, early = readmit(state, config, deps, calls)
        held = ledger.held
        granted = {"trace": held.entries(), **held.update()} if held.granted else {}
        if early is not None:
            return state, calls, early | granted, counted
        state = state.model_copy(update={"usage": ledger.usage})
        counted = {"usage": dump(ledger.usage), "seen": ledger.new_keys, **granted}
    calls, early = _settle(config, deps, calls)
    return state, calls, early, counted


def readmit(
    state: CoreState, config: RunnableConfig, deps: NodeDeps, calls: list[Call]
) -> tuple[Ledger, dict[str, Any] | None]:
    """The gate's checks again, for calls an edit wrote: each pending call as a fresh proposal
    (counted against budgets that an edit of ``usage`` alone cannot lower; a call under
    approval asked about here), replaced by what the gate would have recorded; or the stop."""
    usage, record = _before_the_gate(state, calls)
    held = Limits(deps.policy, state.extensions)
    ledger = Ledger(recorded(usage, record), list(record), state.usage.steps, held)
    for index, call in enumerate(calls):
        if call.outcome is not None:  # settled: shown to the model, never run; still counted
            ledger.count(call)
            continue
        checked = check(
            ledger, deps, config, ToolAction(name=call.tool, args=call.args, id=call.id), index
        )
        if isinstance(checked, Stop):
            return ledger, _stopped_at(calls, index, _edited(checked))
        ledger.count(checked)
        calls[index] = checked
    return ledger, None


def _before_the_gate(state: CoreState, calls: list[Call]) -> tuple[Usage, list[str]]:
    """The counters and loop keys to check the calls against. When the record ends with exactly
    these calls' keys, the gate counted them already (an edit of something else, or of nothing
    that matters, after the gate ran): they are taken back, to be counted again once, so the
    calls are not their own repeats. An edit cannot lower a count this way: what is taken back
    is counted again."""
    record = state.seen[state.seen_from :]
    own = [loop_key(call.tool, call.args) for call in calls]
    if len(own) > len(record) or record[len(record) - len(own) :] != own:
        return state.usage, record
    per_tool = dict(state.usage.per_tool)
    for call in calls:
        per_tool[call.tool] = max(per_tool.get(call.tool, 0) - 1, 0)
    calls_before = max(state.usage.tool_calls - len(calls), 0)
    usage = state.usage.model_copy(update={"tool_calls": calls_before, "per_tool": per_tool})
    return usage, record[: len(record) - len(own)]


def _edited(stop: Stop) -> Stop:
    said = f"{stop.message}; the state held this call, but the gate did not let it through"
    return Stop(stop.reason, stop.detail, said)


def _stopped_at(calls: list[Call], index: int, stop: Stop) -> dict[str, Any]:
    """Stop at one call: it is marked with the stop (observe traces it, with the reason)."""
    marked = [
        _with(c, Outcome(ok=False, error=str(stop))) if i == index else c
        for i, c in enumerate(calls)
    ]
    return {**stop.update(), "calls": [dump(c) for c in marked]}


def _settle(
    config: RunnableConfig, deps: NodeDeps, calls: list[Call]
) -> tuple[list[Call], dict[str, Any] | None]:
    """Crash recovery and argument checks: what is known before anything runs."""
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
            limit = deps.policy.max_observation_chars
            return answered_outcome(decision.response, limit, deps.secrets)
        if decision.approved:
            return None
    stop = Stop(StopReason.TOOL_OUTCOME_UNKNOWN, call.tool, why)
    return _stopped_at(calls, calls.index(call), stop)


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
