"""gate: the policy boundary. Budgets, allowlist, loop detection and human approval, in that order.

Nothing the model says reaches a tool without passing here, and the gate reads only the
proposed call and the run's own counters, never tool output: an observation cannot talk it round.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from gated_react.agent import Agent
from gated_react.approval import ask
from gated_react.budget import check_before_tool
from gated_react.canonical import args_hash, canonical_json, short_hash
from gated_react.loops import is_repeat, loop_key
from gated_react.state import Call, Outcome, Step, ToolAction, TraceEntry, dump
from gated_react.stops import Stop, StopReason


def gate(state: Step, config: RunnableConfig, *, agent: Agent) -> dict[str, Any]:
    """Let the proposed call through (recording it first), refuse it, or stop the run."""
    if not isinstance(state.action, ToolAction):
        raise TypeError("gate runs only after validate produced a tool action")
    name, args = state.action.name, state.action.args
    over = check_before_tool(state.usage, agent.policy.budget, name)
    if over is not None:
        return stopped(state, name, args, over)
    refusal = refuse(agent, name)
    if refusal is not None:
        return refused(state, agent, name, args, refusal)
    if is_repeat(state.seen, name, args, agent.policy.loop_detection):
        return stopped(state, name, args, loop(name))
    if name in agent.policy.require_approval:
        approved = approve(state, agent, name, args)
        if isinstance(approved, Stop):
            return stopped(state, name, args, approved)
        args = approved
    thread = str(config.get("configurable", {}).get("thread_id", "-"))
    key = short_hash(f"{thread}:{state.usage.steps}:{name}:{canonical_json(args)}", 24)
    return admitted(state, Call(step=state.usage.steps, tool=name, args=args, key=key))


def refuse(agent: Agent, name: str) -> Stop | None:
    """Deny by default: unknown names and names outside the allowlist."""
    if name not in agent.tools:
        return Stop(StopReason.TOOL_MISSING, name, f"there is no tool named {name!r}")
    if name not in agent.allowed:
        return Stop(StopReason.TOOL_DENIED, name, f"the policy does not allow {name!r}")
    return None


def loop(name: str) -> Stop:
    return Stop(
        StopReason.LOOP_DETECTED, message=f"{name} was already called with the same arguments"
    )


def approve(state: Step, agent: Agent, name: str, args: dict[str, Any]) -> dict[str, Any] | Stop:
    """Ask a human; the arguments to run with, or the stop their answer causes.
    Edited arguments pass the loop check again (and the tool's schema check in execute)."""
    decision = ask(
        {
            "kind": "approval",
            "tool": name,
            "args": args,
            "step": state.usage.steps,
            "why": f"policy requires a human to approve every {name} call",
        }
    )
    if not decision.approved:
        why = decision.reason or "no reason given"
        return Stop(StopReason.TOOL_REJECTED, name, f"a human rejected {name}: {why}")
    if decision.args is None or decision.args == args:
        return args
    if is_repeat(state.seen, name, decision.args, agent.policy.loop_detection):
        return loop(name)
    return decision.args


def admitted(state: Step, call: Call) -> dict[str, Any]:
    """Record the call and count it against the budgets before anything runs."""
    per_tool = dict(state.usage.per_tool)
    per_tool[call.tool] = per_tool.get(call.tool, 0) + 1
    usage = state.usage.model_copy(
        update={"tool_calls": state.usage.tool_calls + 1, "per_tool": per_tool}
    )
    return {"call": dump(call), "usage": dump(usage), "seen": [loop_key(call.tool, call.args)]}


def refused(
    state: Step, agent: Agent, name: str, args: dict[str, Any], why: Stop
) -> dict[str, Any]:
    """Stop; or, with ``on_tool_error="observe"``, show the model the refusal and its tools.
    A refusal shown to the model still counts as a call, and repeating it is a loop."""
    if agent.policy.on_tool_error == "stop":
        return stopped(state, name, args, why)
    if is_repeat(state.seen, name, args, agent.policy.loop_detection):
        return stopped(state, name, args, loop(name))
    shown = f"{why.message}. Tools you may call: {sorted(agent.allowed)}"
    outcome = Outcome(ok=False, observation=shown, error=str(why))
    return admitted(
        state, Call(step=state.usage.steps, tool=name, args=args, key="", outcome=outcome)
    )


def stopped(state: Step, name: str, args: dict[str, Any], stop: Stop) -> dict[str, Any]:
    """End the run here; the refused call goes into the trace with its stop reason."""
    entry = TraceEntry(
        step=state.usage.steps,
        tool=name,
        args_hash=args_hash(args),
        ok=False,
        stop_reason=str(stop),
    )
    return {**stop.update(), "trace": [dump(entry)]}
