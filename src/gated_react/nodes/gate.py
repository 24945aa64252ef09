"""gate: the policy boundary. Budgets, allowlist, loop detection and human approval, in that order.

Nothing the model says reaches a tool without passing here, and the gate reads only the
proposed call and the run's own counters, never tool output: an observation cannot talk it round.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig

from gated_react._engine.approval import ask
from gated_react._engine.budget_checks import check_before_tool
from gated_react._engine.call_keys import args_hash, idempotency_key, is_repeat, loop_key
from gated_react._engine.deps import NodeDeps
from gated_react._engine.langgraph_internals import can_pause
from gated_react._engine.tool_runner import check_args
from gated_react.state import Call, CoreState, Outcome, ToolAction, TraceEntry, dump
from gated_react.stops import Stop, StopReason


def gate(state: CoreState, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Let the proposed call through (recording it first), refuse it, or stop the run."""
    if not isinstance(state.action, ToolAction):  # the routers never send one; a caller might
        why = "the gate was reached without a tool call to check"
        return Stop(StopReason.INVALID_ACTION, "no_action", why).update()
    name, args = state.action.name, state.action.args
    over = check_before_tool(state.usage, deps.policy.budget, name)
    if over is not None:
        return stopped(state, name, args, over)
    refusal = refuse(deps, name)
    if refusal is not None:
        return refused(state, deps, name, args, refusal)
    if is_repeat(state.seen, name, args, deps.policy.loop_detection):
        return stopped(state, name, args, loop(name))
    if name in deps.policy.require_approval:
        approved = approve(state, deps, name, args) if can_pause(config) else unavailable(name)
        if isinstance(approved, Stop):
            return stopped(state, name, args, approved)
        args = approved
    thread = str(config.get("configurable", {}).get("thread_id", "-"))
    key = idempotency_key(thread, state.usage.steps, name, args)
    return admitted(state, Call(step=state.usage.steps, tool=name, args=args, key=key))


def refuse(deps: NodeDeps, name: str) -> Stop | None:
    """Deny by default: unknown names and names outside the allowlist."""
    if name not in deps.tools:
        return Stop(StopReason.TOOL_MISSING, name, f"there is no tool named {name!r}")
    if name not in deps.allowed:
        return Stop(StopReason.TOOL_DENIED, name, f"the policy does not allow {name!r}")
    return None


def loop(name: str) -> Stop:
    return Stop(
        StopReason.LOOP_DETECTED, message=f"{name} was already called with the same arguments"
    )


def unavailable(name: str) -> Stop:
    """A call that needs approval in a graph with no checkpointer: nothing could ever answer."""
    return Stop(
        StopReason.APPROVAL_UNAVAILABLE,
        name,
        f"{name} needs a human's approval, but the graph has no checkpointer to pause on; "
        "build it with one (build_graph(..., checkpointer=...)) or serve it with langgraph.json",
    )


def approve(
    state: CoreState, deps: NodeDeps, name: str, args: dict[str, Any]
) -> dict[str, Any] | Stop:
    """Ask a human; the arguments to run with, or the stop their answer causes.
    Edited arguments must fit the tool's schema (else the human is asked again) and pass the
    loop check again."""
    question = {
        "kind": "approval",
        "tool": name,
        "args": args,
        "step": state.usage.steps,
        "why": f"policy requires a human to approve every {name} call",
    }
    decision = ask(question, partial(check_args, deps.tools[name]))
    if not decision.approved:
        why = decision.reason or "no reason given"
        return Stop(StopReason.TOOL_REJECTED, name, f"a human rejected {name}: {why}")
    if decision.args is None or decision.args == args:
        return args
    if is_repeat(state.seen, name, decision.args, deps.policy.loop_detection):
        return loop(name)
    return decision.args


def admitted(state: CoreState, call: Call) -> dict[str, Any]:
    """Record the call and count it against the budgets before anything runs."""
    per_tool = dict(state.usage.per_tool)
    per_tool[call.tool] = per_tool.get(call.tool, 0) + 1
    usage = state.usage.model_copy(
        update={"tool_calls": state.usage.tool_calls + 1, "per_tool": per_tool}
    )
    return {"call": dump(call), "usage": dump(usage), "seen": [loop_key(call.tool, call.args)]}


def refused(
    state: CoreState, deps: NodeDeps, name: str, args: dict[str, Any], why: Stop
) -> dict[str, Any]:
    """Stop; or, with ``on_tool_error="observe"``, show the model the refusal and its tools.
    A refusal shown to the model still counts as a call, and repeating it is a loop."""
    if deps.policy.on_tool_error == "stop":
        return stopped(state, name, args, why)
    if is_repeat(state.seen, name, args, deps.policy.loop_detection):
        return stopped(state, name, args, loop(name))
    shown = f"{why.message}. Tools you may call: {sorted(deps.allowed)}"
    outcome = Outcome(ok=False, observation=shown, error=str(why))
    return admitted(
        state, Call(step=state.usage.steps, tool=name, args=args, key="", outcome=outcome)
    )


def stopped(state: CoreState, name: str, args: dict[str, Any], stop: Stop) -> dict[str, Any]:
    """End the run here; the refused call goes into the trace with its stop reason."""
    entry = TraceEntry(
        step=state.usage.steps,
        tool=name,
        args_hash=args_hash(args),
        ok=False,
        stop_reason=str(stop),
    )
    return {**stop.update(), "trace": [dump(entry)]}
