"""execute: run the approved calls with their argument checks, timeouts and retries; the calls
of a reply with several run at once, each with its own timeout and idempotency key.

If this node is the first thing a resumed run does, an earlier attempt may have run the tools
before the process died. Only an idempotent tool is run again; any other stops the run with
``tool_outcome_unknown`` (or asks a human, when the policy puts the tool under approval).

State is data an editor controls (Studio's edit-and-continue, ``update_state``, a
``Command(update=..., goto="execute")``, the server's REST API write any channel), so no call
runs on the state's word alone. Every call is checked against the policy's allowlist here
again, always. And unless the gate of this process just let exactly these calls through on
this thread (``_engine/admissions.py``: proof no edit can forge), they are not taken for the
gate's decision: each goes through the gate's checks again (the reply's call count, budgets
from the record of the run's calls, the allowlist, loops, and a human's approval asked here),
as if the model had just proposed it. A refused call stops the run with the gate's reason,
traced. A ``Send`` to this node carries a state of its own: nothing in it runs.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig

from gated_react._engine import tool_results, tool_runner, tracing
from gated_react._engine.admissions import ADMITTED, sent
from gated_react._engine.branches import Unsafe, aon_a_branch, on_a_branch
from gated_react._engine.budget_checks import Limits, recorded
from gated_react._engine.contract import ActionError, check_count
from gated_react._engine.deps import NodeDeps
from gated_react._engine.langgraph_internals import was_sent
from gated_react._engine.pending import before_the_gate, step_record
from gated_react._engine.reads import read
from gated_react._engine.storable import error_text
from gated_react._engine.unknown_outcomes import may_have_run, outcome_unknown
from gated_react.errors import MisroutedStep
from gated_react.nodes.gate import Ledger, check, refuse
from gated_react.state import Call, CoreState, Outcome, ToolAction, dump
from gated_react.stops import Stop, StopReason

Ran = tuple[int, Any, Exception | None]
"""A finished call: its place in ``state.calls``, its value, or the error it raised."""


class ExecuteChannels(TypedDict, total=False):
    """The channels execute reads, as stored: the graph hands it these alone, and ``read``
    validates them into a ``CoreState`` that has no other field."""

    calls: list[dict[str, Any]]
    usage: dict[str, Any]
    extensions: list[dict[str, Any]]
    seen: list[str]
    seen_from: int
    spend_from: int
    turn: str | None
    traceparent: str | None


def execute(
    state: CoreState | ExecuteChannels, config: RunnableConfig, *, deps: NodeDeps
) -> dict[str, Any]:
    """Sync body: one call runs here, several on threads of their own."""
    if was_sent(config):
        return sent("execute")
    state = read(CoreState, state, ExecuteChannels, config)
    linked = tracing.carry(deps.spans, state.traceparent, config)
    unsafe = _unsafe(state, deps)
    branched = bool(unsafe.ids) and on_a_branch(config, unsafe)
    edited = _unproven(state, config, deps)
    state, calls, early, counted = prepare(state, config, deps, edited, branched)
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


async def aexecute(
    state: CoreState | ExecuteChannels, config: RunnableConfig, *, deps: NodeDeps
) -> dict[str, Any]:
    """Async body: the calls are awaited together."""
    if was_sent(config):
        return sent("execute")
    state = read(CoreState, state, ExecuteChannels, config)
    linked = tracing.carry(deps.spans, state.traceparent, config)
    unsafe = _unsafe(state, deps)
    branched = bool(unsafe.ids) and await aon_a_branch(config, unsafe)
    edited = _unproven(state, config, deps)
    state, calls, early, counted = prepare(state, config, deps, edited, branched)
    if early is not None:
        return linked | counted | early
    started = time.monotonic()
    todo = [i for i, call in enumerate(calls) if call.outcome is None]
    ran = await asyncio.gather(*(arun_one(deps, calls, i, config) for i in todo))
    return linked | counted | completed(state, deps, calls, list(ran), started)


def _unsafe(state: CoreState, deps: NodeDeps) -> Unsafe:
    """The calls waiting to run that could do harm twice (are not idempotent)."""
    waiting = [c for c in state.calls if c.outcome is None and not deps.idempotent(c.tool)]
    by_arguments = deps.policy.loop_detection != "off"
    return Unsafe.of(waiting, state.spend_from, state.turn, by_arguments=by_arguments)


def _unproven(state: CoreState, config: RunnableConfig, deps: NodeDeps) -> bool:
    """True unless the gate of this process let exactly these calls through on this thread
    (taken once: a replay of the same step is checked again). A step scheduled beside the
    gate's own waiting question was refused by ``read``, before any admission is taken."""
    return not ADMITTED.take(deps.admission_scope, config, state.calls)


def run_one(deps: NodeDeps, calls: list[Call], index: int, config: RunnableConfig) -> Ran:
    call = calls[index]
    with tracing.tool(deps.spans, config, call) as span:
        try:
            tool, args, limits = (
                deps.tools[call.tool],
                _args(deps, call, config),
                _limits(deps, call),
            )
            run = partial(tool_runner.invoke, tool, args, config, *limits)
            if deps.middleware is None or not deps.middleware.tool_wraps:
                value = run()
            else:  # the tool hooks, around a call the gate let through
                value = deps.middleware.call_tool(deps, call, config, run)
        except Exception as exc:
            tracing.tool_failed(deps.spans, span, exc)
            return index, None, exc
        tracing.tool_done(deps.spans, span, value)
    return index, value, None


async def arun_one(deps: NodeDeps, calls: list[Call], index: int, config: RunnableConfig) -> Ran:
    call = calls[index]
    with tracing.tool(deps.spans, config, call) as span:
        try:
            tool, args, limits = (
                deps.tools[call.tool],
                _args(deps, call, config),
                _limits(deps, call),
            )
            run = partial(tool_runner.ainvoke, tool, args, config, *limits)
            if deps.middleware is None or not deps.middleware.tool_wraps:
                value = await run()
            else:
                value = await deps.middleware.acall_tool(deps, call, config, run)
        except Exception as exc:
            tracing.tool_failed(deps.spans, span, exc)
            return index, None, exc
        tracing.tool_done(deps.spans, span, value)
    return index, value, None


def prepare(
    state: CoreState,
    config: RunnableConfig,
    deps: NodeDeps,
    edited: bool = False,
    branched: bool = False,
) -> tuple[CoreState, list[Call], dict[str, Any] | None, dict[str, Any]]:
    """The state and calls with what is known before anything runs (refusals, bad arguments),
    an update that settles the step without running a tool (or None), and the counters an
    edited state's calls were counted into (written with either)."""
    calls = list(state.calls)
    if not any(call.outcome is None for call in calls):
        raise MisroutedStep("execute", "with no call the gate let through waiting to run")
    counted: dict[str, Any] = {}
    for index, call in enumerate(calls):
        why = None if call.outcome else refuse(deps, call.tool)
        if why is not None:  # the allowlist holds whatever wrote the state
            return state, calls, _stopped_at(calls, index, _edited(why)), counted
    by_gate = False  # a step this process's gate just admitted has not run anywhere
    if edited:
        ledger, early, by_gate = readmit(state, config, deps, calls, branched)
        held = ledger.held
        granted = {"trace": held.entries(), **held.update()} if held.granted else {}
        if early is not None:
            return state, calls, early | granted, counted
        state = state.model_copy(update={"usage": ledger.usage})
        counted = {"usage": dump(ledger.usage), **_new_keys(state, ledger, by_gate), **granted}
    calls, early = _settle(deps, calls, may_have_run(config, by_gate, branched))
    return state, calls, early, counted


def readmit(
    state: CoreState,
    config: RunnableConfig,
    deps: NodeDeps,
    calls: list[Call],
    branched: bool = False,
) -> tuple[Ledger, dict[str, Any] | None, bool]:
    """The gate's checks again, for calls an edit wrote: each pending call as a fresh proposal
    (counted against budgets that an edit of ``usage`` alone cannot lower; a call under
    approval asked about here), replaced by what the gate would have recorded; or the stop.
    Also whether the gate had counted these calls for the step the run is on
    (``pending.before_the_gate``): only such calls may have run before a crash."""
    usage, record, by_gate = before_the_gate(state, calls, step_record(state, config))
    ran_maybe = may_have_run(config, by_gate, branched) is not None
    held = Limits(deps.policy, state.extensions)
    ledger = Ledger(recorded(usage, record), list(record), state.usage.steps, held)
    try:  # the contract validate holds a reply to: no more calls than one reply may make
        check_count(len(calls), deps.policy.max_parallel_calls)
    except ActionError as err:
        why = Stop(StopReason.INVALID_ACTION, err.why, str(err))
        return ledger, _stopped_at(calls, 0, _edited(why)), by_gate
    for index, call in enumerate(calls):
        if call.outcome is not None:  # settled: shown to the model, never run; still counted
            ledger.count(call)
            continue
        action = ToolAction(name=call.tool, args=call.args, id=call.id)
        # after a crash or in a replay, a call that may have run is asked about once, by _settle
        asks_later = ran_maybe and not deps.idempotent(call.tool)
        checked = check(ledger, deps, config, action, index, ask_here=not asks_later)
        if isinstance(checked, Stop):
            return ledger, _stopped_at(calls, index, _edited(checked)), by_gate
        ledger.count(checked)
        calls[index] = checked
    return ledger, None, by_gate


def _new_keys(state: CoreState, ledger: Ledger, by_gate: bool) -> dict[str, Any]:
    """The loop keys to record for the re-checked calls: none when the gate counted them and
    the record ends with exactly them (``before_the_gate`` took them back to count them again
    once), so a crash or an edit never records a call twice; a repeat of a completed call is
    recorded again."""
    keys = ledger.new_keys
    if by_gate and keys and state.seen[len(state.seen) - len(keys) :] == keys:
        return {}
    return {"seen": keys}


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
    deps: NodeDeps, calls: list[Call], ran_maybe: str | None
) -> tuple[list[Call], dict[str, Any] | None]:
    """Crash recovery and argument checks: what is known before anything runs. With
    ``ran_maybe`` (why the calls may have run already), a call that is not idempotent runs
    only if a human says so."""
    if ran_maybe is not None:
        for index, call in enumerate(calls):
            if call.outcome is None and not deps.idempotent(call.tool):
                unknown = outcome_unknown(deps, call, ran_maybe)
                if isinstance(unknown, Outcome):
                    calls[index] = _with(call, unknown)
                elif unknown is not None:
                    return calls, _stopped_at(calls, index, unknown)
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


def _with(call: Call, outcome: Outcome) -> Call:
    return call.model_copy(update={"outcome": outcome})


def _args(deps: NodeDeps, call: Call, config: RunnableConfig) -> dict[str, Any]:
    """What the tool is invoked with: the arguments the gate let through, the idempotency key
    when it takes one, and, for a tool taking injected arguments or returning an artifact, the
    full ``ToolCall`` (injected arguments filled, never written to the state: the gate and the
    record see ``call.args``)."""
    args = {**call.args, tool_runner.KEY_PARAM: call.key} if call.tool in deps.keyed else call.args
    if deps.injector is None or call.tool not in deps.injector.takes:
        tool = deps.tools[call.tool]
        if tool.response_format == "content_and_artifact" or tool.handle_tool_error:
            # given its ToolCall, it answers with a ToolMessage: the artifact is not lost, nor
            # whether the error it handled was one (status "error")
            return {"name": call.tool, "args": args, "id": call.tool_call_id, "type": "tool_call"}
        return args
    filled = deps.injector.tool_call(call.tool, call.args, call.tool_call_id, config)
    if call.tool in deps.keyed:
        filled["args"][tool_runner.KEY_PARAM] = call.key
    return dict(filled)


def _limits(deps: NodeDeps, call: Call) -> tuple[float, int]:
    retries = deps.policy.tool_retries if deps.idempotent(call.tool) else 0
    return deps.policy.timeout_for(call.tool), retries


def completed(
    state: CoreState, deps: NodeDeps, calls: list[Call], ran: list[Ran], started: float
) -> dict[str, Any]:
    """Record each outcome (a value, a timeout or an error) and the seconds the step took. A
    tool that returns an exception object returned a value: only a raised one is an error. With
    ``on_tool_error="stop"`` the first failed call, in the reply's order, stops the run; a
    call a middleware hook tried to change (``tool_denied``) stops it whatever that says."""
    seconds = time.monotonic() - started
    usage = dump(state.usage.model_copy(update={"seconds": state.usage.seconds + seconds}))
    failures: list[Stop] = []
    for index, value, error in sorted(ran, key=lambda item: item[0]):
        outcome, why = _outcome(deps, calls[index], value, error)
        calls[index] = _with(calls[index], outcome)
        failures += [why] if why is not None else []
    update: dict[str, Any] = {"calls": [dump(c) for c in calls], "usage": usage}
    if deps.policy.on_tool_error == "observe":
        failures = [why for why in failures if why.reason is StopReason.TOOL_DENIED]
    if failures:
        update.update(failures[0].update())
    return update


def _outcome(
    deps: NodeDeps, call: Call, value: Any, error: Exception | None
) -> tuple[Outcome, Stop | None]:
    if isinstance(error, tool_runner.ToolTimeout):
        why = Stop(StopReason.TOOL_TIMEOUT, call.tool, str(error))
    elif isinstance(error, tool_runner.CallChanged):
        why = Stop(StopReason.TOOL_DENIED, call.tool, f"{call.tool} did not run: {error}")
    elif error is not None:
        text = f"{type(error).__name__}: {error_text(error, *deps.secrets)}"[:500]
        why = Stop(StopReason.TOOL_ERROR, call.tool, f"{call.tool} failed: {text}")
    else:
        done = tool_results.outcome(value, deps.policy.max_observation_chars, deps.secrets)
        if not tool_results.failed(value):
            return done, None
        # an error the tool handled itself (a ToolMessage with status "error", as LangChain's
        # handle_tool_error makes): the model is shown the tool's own words, as create_agent does
        text = str(done.observation)[:500]
        why = Stop(StopReason.TOOL_ERROR, call.tool, f"{call.tool} failed: {text}")
        return done.model_copy(update={"ok": False, "error": str(why)}), why
    return Outcome(ok=False, observation=why.message, error=str(why)), why
