"""Each call of a step given its way before ``execute`` runs anything (``planned``): shown
(a human's answer), answered from the record (it ran and returned before), stopped, or run,
under its permit or one the gate's checks, run again here, give it. The calls that run share
the run's time left (``_in_time``)."""

from __future__ import annotations

import operator
from collections.abc import Sequence

from langchain_core.messages import ToolMessage

from gated_react._engine.authority.admit import refuse
from gated_react._engine.authority.budgets import enforce, reopened
from gated_react._engine.authority.known import permitted
from gated_react._engine.authority.limits import LEAST_SECONDS, check_seconds
from gated_react._engine.authority.records import Record
from gated_react._engine.authority.run_once import Plan, as_edited, not_let_through
from gated_react._engine.authority.started import ask_again, progress, shown_result
from gated_react._engine.conversation.chat import result
from gated_react._engine.execution.shares import Shares
from gated_react._engine.execution.tool_args import check_args
from gated_react._engine.model.contract import ActionError, check_count
from gated_react.state import Call, Outcome
from gated_react.stops import Stop, StopReason

_SEQ = operator.attrgetter("seq")


def planned(plan: Plan) -> None:
    """Each call's way, in the reply's order: shown, answered from the record, or run (its
    permit checked, or earned again); the first stop settles the rest as not run. Calls the
    gate did not let through are held to what one reply may hold, as the gate holds a reply."""
    ids = [c.id for c in plan.calls]
    if len(set(ids)) < len(ids):  # one result answers one call: a copy would run again
        twice = next(i for i in ids if ids.count(i) > 1)
        said = f"the step holds call {twice!r} more than once"
        stop = Stop(StopReason.INVALID_ACTION, "duplicate_call", said)
        plan.stop = (not_let_through(stop), twice)
        return
    unpermitted = [
        c for c in plan.calls
        if c.shown is None and not permitted(plan.book.tally.permits.get(c.id), c, plan.deps)
    ]  # fmt: skip
    if unpermitted:
        try:
            check_count(len(plan.calls), plan.deps.policy.max_parallel_calls)
        except ActionError as err:
            stop = Stop(StopReason.INVALID_ACTION, err.why, str(err))
            plan.stop = (not_let_through(stop), unpermitted[0].id)
            return
    for index, call in enumerate(list(plan.calls)):
        if plan.stop is not None:
            break
        way = _way(plan, index, call)
        if isinstance(way, Stop):
            plan.stop = (way, call.id)
        elif isinstance(way, ToolMessage):
            plan.answers[index] = way
            settled = Outcome(ok=way.status != "error", text=way.text)
            plan.calls[index] = call.model_copy(update={"outcome": settled})
        else:
            plan.calls[index] = way
            plan.runs.append(index)
            if not plan.deps.idempotent(way.tool) and index not in plan.again:
                plan.once.append(index)
    if plan.runs and plan.stop is None:
        _in_time(plan)
    # a resume given other limits that ends before the next decision shows them too
    plan.records = reopened(plan.book, plan.place, plan.step.run, plan.deps)
    keeper = plan._keeper  # the checks ran only if a call needed them
    if keeper is not None:
        plan.records += [
            *keeper.asking, *keeper.held.records(plan.place.thread, plan.step.run), *keeper.records
        ]  # fmt: skip
    plan.records += plan.refused  # after the permits the checks wrote for them


def _in_time(plan: Plan) -> None:
    """No call runs once the run's time is spent: a call let through before a kill, run again
    on resume after the kills spent the budget, stops the run (or asks, as the gate asks).
    The calls that run share what is left."""
    policy = plan.deps.policy
    plan.shares = Shares(policy.budget.max_seconds - plan.book.tally.seconds)
    left = plan.shares.left
    if left >= LEAST_SECONDS and (
        policy.on_budget != "ask" or left >= len(plan.runs) * _longest(plan)
    ):
        return  # the common case, without reading the extensions a human granted
    keeper = plan.keeper
    over = enforce(lambda budget: check_seconds(keeper.usage, budget), keeper.held,
                   keeper.usage, keeper.config, keeper.step)  # fmt: skip
    if over is not None:
        plan.stop = (over, plan.calls[plan.runs[0]].id)
        plan.runs.clear()
        plan.once.clear()
    else:
        plan.shares = Shares(keeper.held.budget.max_seconds - keeper.usage.seconds)


def _longest(plan: Plan) -> float:
    return max(plan.deps.policy.timeout_for(plan.calls[i].tool) for i in plan.runs)


def _way(plan: Plan, index: int, call: Call) -> Call | ToolMessage | Stop:
    """A call's way: answered without running (shown, done in the record), stopped, or run
    (under its permit, or one earned again here)."""
    deps = plan.deps
    if call.shown is not None:
        return shown_result(call, call.shown)
    denied = refuse(deps, call.tool)  # the allowlist holds whatever wrote the state
    if denied is not None:
        return not_let_through(denied)
    known = [*plan.about.get(call.key, ()), *_same_call(plan.about.get(call.id, ()), call)]
    started, done = progress(sorted({r.seq: r for r in known}.values(), key=_SEQ))
    if done is not None:  # it ran and returned: answered with what it returned, run again never
        return as_edited(call, done.model_copy(update={"tool_call_id": call.id}), done.text, deps)
    started = started and not deps.idempotent(call.tool)
    if not permitted(plan.book.tally.permits.get(call.id), call, deps):
        admitted = plan.keeper.admit(call.model_copy(update={"key": ""}), ask_here=not started)
        if isinstance(admitted, Stop) or admitted.shown is not None:
            return _settled(admitted)
        call = admitted
    if started:
        asked = ask_again(plan.deps, call, plan.keeper.step)
        if isinstance(asked, Call):
            plan.again.add(index)
        return asked
    return _args_checked(plan, call)


def _same_call(records: Sequence[Record], call: Call) -> list[Record]:
    """Of the records under ``call``'s id (in its run), those of its tool: one proposal of
    the model, whatever arguments it ran with (a human's edit, then an edit of the replayed
    step, are still that one call; a model that numbers its calls ``call_1`` in every run
    says nothing of this call in another)."""
    return [r for r in records if r.body.get("tool") == call.tool]


def _settled(admitted: Call | Stop) -> ToolMessage | Stop:
    """A call the gate's checks, run again here, did not let through."""
    if isinstance(admitted, Stop):
        return not_let_through(admitted)
    assert admitted.shown is not None
    return shown_result(admitted, admitted.shown)


def _args_checked(plan: Plan, call: Call) -> Call | ToolMessage | Stop:
    """The call, or what arguments its tool's schema refuses make of it (with tool hooks,
    they are given the error, ``ToolNode``'s way): a stop, or under ``on_tool_error=
    "observe"`` an answer saying why, and a ``done`` record saying the call failed."""
    deps = plan.deps
    hooked = deps.middleware is not None and bool(deps.middleware.tool_wraps)
    problem = None if hooked else check_args(deps.tools[call.tool], call.args)
    if problem is None:
        return call
    why = Stop(StopReason.TOOL_BAD_ARGS, call.tool, problem)
    if deps.policy.on_tool_error == "stop":
        return why
    plan.refused.append(plan.done(call, problem, ok=False, why=why, seconds=0.0))
    return result(call.tool, call.id, problem, ok=False)
