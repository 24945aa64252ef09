"""execute: run the calls the gate let through, each under its permit, checked and timed; the
calls of a reply with several run at once, each with its own timeout and key.

A call runs only under a valid permit in the run's record: exactly its tool with exactly its
arguments, under this policy, signed by a key this process holds. State is data an editor
controls (Studio's edit-and-continue, ``update_state``, a ``Command``, a ``Send``, a fork), so
a call without one (an edit, a copied thread, a resume in a process that cannot check the
signature) is not refused outright: it goes through the gate's checks again here, as if the
model had just proposed it, a human asked again where the policy wants one
(``_engine/authority/admit.py``). The arguments a tool is given are the permit's, copied
afresh, never an object anything else holds.

A call that is not idempotent runs at most once per key (``_engine/authority/run_once.py``):
after a crash, in a replay, a fork, a copy of the thread or an answer sent twice, the record
says whether it started or finished, and the run goes on from what it says.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt

from gated_react._engine.authority.ledger import Place
from gated_react._engine.authority.run_once import Plan
from gated_react._engine.authority.waiting import Running
from gated_react._engine.authority.ways import planned
from gated_react._engine.conversation.steps import run_step
from gated_react._engine.deadline import DeadlinePassed, await_within, call_within
from gated_react._engine.deps import NodeDeps
from gated_react._engine.execution import tool_runner
from gated_react._engine.execution.injection import masked_config
from gated_react._engine.execution.shares import Shares
from gated_react._engine.execution.tool_args import KEY_PARAM
from gated_react._engine.observability import tracing
from gated_react.errors import Unrecorded
from gated_react.state import Call

Ran = tuple[int, Any, Exception | None, float]
"""A finished call: its place in the step, its value or the error it raised, its seconds."""


class ExecuteChannels(TypedDict, total=False):
    """The channels execute reads, as stored."""

    messages: list[Any]
    step: dict[str, Any] | None


def execute(state: ExecuteChannels, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Sync body: one call runs here, several on threads of their own."""
    place = Place.of(config)
    place.resumed(config)  # read the thread anew if it was deleted
    step = run_step(state, "execute", place.saved, config)
    deps.spans.note(config, place, step.run)
    ledger = place.ledger
    book = ledger.book(place.thread, step.run)
    messages = state.get("messages") or []
    whole = place.whole(deps.policy.budget, tools=True)
    plan = Plan.of(step, messages, book=book, place=place, deps=deps, config=config, whole=whole)
    plan.found(ledger.about(plan.once_keys()))
    try:
        planned(plan)
    except GraphInterrupt:  # a call re-gated here paused on a question: that it asked is kept
        ledger.append(plan.asking())
        raise
    ledger.append(plan.records)
    plan.claimed([ledger.claim(record) for record in plan.claims()])
    todo = plan.to_run()
    plan.shares.begin(todo, time.monotonic())
    if len(todo) == 1:
        ran = [run_one(deps, plan, todo[0], config)]
    elif todo:
        with ThreadPoolExecutor(max_workers=len(todo)) as pool:
            jobs = [
                pool.submit(contextvars.copy_context().run, run_one, deps, plan, i, config)
                for i in todo
            ]
            ran = [job.result() for job in jobs]
    else:
        ran = []
    update = plan.completed(ran)
    ledger.append(plan.records)
    return update


async def aexecute(
    state: ExecuteChannels, config: RunnableConfig, *, deps: NodeDeps
) -> dict[str, Any]:
    """Async body: the calls are awaited together."""
    place = Place.of(config)
    await place.aresumed(config)  # read the thread anew if it was deleted
    step = run_step(state, "execute", place.saved, config)
    deps.spans.note(config, place, step.run)
    ledger = place.ledger
    book = await ledger.abook(place.thread, step.run)
    messages = state.get("messages") or []
    whole = await place.awhole(deps.policy.budget, tools=True)
    plan = Plan.of(step, messages, book=book, place=place, deps=deps, config=config, whole=whole)
    plan.found(await ledger.aabout(plan.once_keys()))
    try:
        planned(plan)
    except GraphInterrupt:
        await ledger.aappend(plan.asking())
        raise
    await ledger.aappend(plan.records)
    plan.claimed([await ledger.aclaim(record) for record in plan.claims()])
    todo = plan.to_run()
    plan.shares.begin(todo, time.monotonic())
    ran = await asyncio.gather(*(arun_one(deps, plan, i, config) for i in todo))
    update = plan.completed(list(ran))
    await ledger.aappend(plan.records)
    return update


def run_one(deps: NodeDeps, plan: Plan, index: int, config: RunnableConfig) -> Ran:
    call, started = plan.calls[index], plan.shares.started(index)
    running = Running(plan.place, plan.step.run, call, started)
    plan.attempts[index] = running.attempt
    config = masked_config(config, deps.secrets)
    shares = plan.shares
    with tracing.tool(deps.spans, config, call) as span:
        try:
            run = partial(tool_runner.invoke, deps.tools[call.tool], _args(deps, call, config),
                          config, *_limits(deps, call), beat=running.beat,
                          until=shares.until)  # fmt: skip
            if deps.middleware is None or not deps.middleware.tool_wraps:
                value = run()
            else:  # the tool hooks, around a call the gate let through, in the run's time
                hooks = partial(deps.middleware.call_tool, deps, call, config, run)
                value = hooks() if shares.left == math.inf else _timed(call, shares, hooks)
        except Unrecorded:  # the store is gone: the step ends as a crash would end it
            raise
        except Exception as exc:
            tracing.tool_failed(deps.spans, span, exc)
            return index, None, exc, time.monotonic() - started
        except BaseException:  # Ctrl-C, SIGTERM: the seconds the call has taken count
            with contextlib.suppress(Unrecorded):
                running.beat()
            raise
        finally:
            shares.end(index, time.monotonic())
        tracing.tool_done(deps.spans, span, value)
    return index, value, None, time.monotonic() - started


async def arun_one(deps: NodeDeps, plan: Plan, index: int, config: RunnableConfig) -> Ran:
    call, started = plan.calls[index], plan.shares.started(index)
    running = Running(plan.place, plan.step.run, call, started)
    plan.attempts[index] = running.attempt
    config = masked_config(config, deps.secrets)
    shares = plan.shares
    with tracing.tool(deps.spans, config, call) as span:
        try:
            run = partial(tool_runner.ainvoke, deps.tools[call.tool], _args(deps, call, config),
                          config, *_limits(deps, call), beat=running.abeat,
                          until=shares.until)  # fmt: skip
            if deps.middleware is None or not deps.middleware.tool_wraps:
                value = await run()
            else:
                hooks = deps.middleware.acall_tool(deps, call, config, run)
                value = await (hooks if shares.left == math.inf else _atimed(call, shares, hooks))
        except Unrecorded:
            raise
        except Exception as exc:
            tracing.tool_failed(deps.spans, span, exc)
            return index, None, exc, time.monotonic() - started
        except BaseException:  # cancelled: the seconds the call has taken count
            with contextlib.suppress(Unrecorded):
                await running.abeat()
            raise
        finally:
            shares.end(index, time.monotonic())
        tracing.tool_done(deps.spans, span, value)
    return index, value, None, time.monotonic() - started


def _timed(call: Call, shares: Shares, hooks: Callable[[], Any]) -> Any:
    """The tool hooks' work, cut off when the run's time is spent (a hook that waits or
    retries spends it too)."""
    began = time.monotonic()
    left = partial(_left, shares)
    try:
        return call_within(hooks, left(), None, left)
    except DeadlinePassed:  # the hooks' thread, and the call in it, run on
        raise tool_runner.TimeSpent(call.tool, time.monotonic() - began, runs_on=True) from None


async def _atimed(call: Call, shares: Shares, hooks: Awaitable[Any]) -> Any:
    began = time.monotonic()
    left = partial(_left, shares)
    try:
        return await await_within(hooks, left(), None, left)
    except DeadlinePassed:
        raise tool_runner.TimeSpent(call.tool, time.monotonic() - began) from None


def _left(shares: Shares) -> float:
    return shares.until() - time.monotonic()


def _args(deps: NodeDeps, call: Call, config: RunnableConfig) -> dict[str, Any]:
    """What the tool is invoked with: the permit's arguments (a fresh copy), the call's key
    when it takes one, and, for a tool taking injected arguments or returning an artifact, the
    full ``ToolCall`` (injected arguments filled, never written to the state)."""
    given = call.frozen()
    args = {**given, KEY_PARAM: call.key} if call.tool in deps.keyed else given
    if deps.injector is None or call.tool not in deps.injector.takes:
        tool = deps.tools[call.tool]
        if tool.response_format == "content_and_artifact" or tool.handle_tool_error:
            # given its ToolCall, it answers with a ToolMessage: the artifact is not lost, nor
            # whether the error it handled was one (status "error")
            return {"name": call.tool, "args": args, "id": call.id, "type": "tool_call"}
        return args
    filled = deps.injector.tool_call(call.tool, call.frozen(), call.id, config)
    if call.tool in deps.keyed:
        filled["args"][KEY_PARAM] = call.key
    return dict(filled)


def _limits(deps: NodeDeps, call: Call) -> tuple[float, int]:
    retries = deps.policy.tool_retries if deps.idempotent(call.tool) else 0
    return deps.policy.timeout_for(call.tool), retries
