"""gate: the policy boundary. Budgets, allowlist, loop detection and human approval, in that order.

Nothing the model says reaches a tool without passing here, and the gate reads only the
proposed calls and the run's own counters, never tool output: an observation cannot talk it
round. A reply with several calls (``Policy.max_parallel_calls``) is checked whole before any
call runs: each counts against the budgets as if the ones before it had run, and if any one
would stop the run, none runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig

from gated_react._engine import gate_spans, tracing
from gated_react._engine.admissions import ADMITTED, sent
from gated_react._engine.approval import answered_outcome, ask, question
from gated_react._engine.budget_checks import (
    Limits,
    check_before_tool,
    enforce,
    held_to_spend,
    recorded,
)
from gated_react._engine.call_keys import (
    LoopIndex,
    args_hash,
    idempotency_key,
    is_repeat,
    loop_key,
    repeats,
)
from gated_react._engine.chat import result
from gated_react._engine.deps import NodeDeps
from gated_react._engine.langgraph_internals import can_pause, was_sent
from gated_react._engine.reads import read
from gated_react._engine.tool_runner import check_args
from gated_react.state import (
    Call,
    CoreState,
    Outcome,
    ToolAction,
    TraceEntry,
    Usage,
    dump,
    tool_actions,
)
from gated_react.stops import Stop, StopReason


@dataclass
class Ledger:
    """The run's counters as they stand with the calls of this step admitted so far."""

    usage: Usage
    seen: list[str]
    step: int
    """The step the calls belong to (the model decision that proposed them)."""
    held: Limits
    """The limits in force, with any extension a human grants while the gate asks."""
    new_keys: list[str] = field(default_factory=list)
    index: LoopIndex = field(init=False)
    """``seen`` counted once, so each loop check is a lookup."""

    def __post_init__(self) -> None:
        self.index = LoopIndex(self.seen)

    def count(self, call: Call) -> None:
        per_tool = dict(self.usage.per_tool)
        per_tool[call.tool] = per_tool.get(call.tool, 0) + 1
        self.usage = self.usage.model_copy(
            update={"tool_calls": self.usage.tool_calls + 1, "per_tool": per_tool}
        )
        key = loop_key(call.tool, call.args)
        self.seen.append(key)
        self.index.add(key)
        self.new_keys.append(key)


class GateChannels(TypedDict, total=False):
    """The channels the gate reads, as stored: the graph hands it these alone, and ``read``
    validates them into a ``CoreState`` that has no other field."""

    action: dict[str, Any] | None
    usage: dict[str, Any]
    extensions: list[dict[str, Any]]
    seen: list[str]
    seen_from: int
    spend: list[float | None]
    spend_from: int
    traceparent: str | None


def gate(
    state: CoreState | GateChannels, config: RunnableConfig, *, deps: NodeDeps
) -> dict[str, Any]:
    """Let the proposed calls through (recording them first), refuse them, or stop the run."""
    if was_sent(config):
        return sent("gate")
    state = read(CoreState, state, GateChannels, config)
    linked = tracing.carry(deps.spans, state.traceparent, config)
    actions = tool_actions(state.action)
    if not actions:  # the routers never send one; a direct caller might
        why = "the gate was reached without a tool call to check"
        return linked | Stop(StopReason.INVALID_ACTION, "no_action", why).update()
    held = Limits(deps.policy, state.extensions)
    record = state.seen[state.seen_from :]
    usage = held_to_spend(state.usage, state.spend[state.spend_from :])
    ledger = Ledger(recorded(usage, record), record, state.usage.steps, held)
    calls = []
    for index, action in enumerate(actions):
        with gate_spans.guardrail(deps.spans, config, action.name) as span:
            checked = check(ledger, deps, config, action, index)
            gate_spans.decided(deps.spans, span, checked, deps.policy.require_approval)
        if isinstance(checked, Stop):
            out = stopped(state, action, checked, actions)
            return linked | out | held.update() | {"trace": [*held.entries(), *out["trace"]]}
        ledger.count(checked)
        calls.append(checked)
    ADMITTED.grant(deps.admission_scope, config, calls)
    admitted = {"calls": [dump(c) for c in calls], "usage": dump(ledger.usage)}
    extended = {"trace": held.entries(), **held.update()} if held.granted else {}
    return linked | admitted | {"seen": ledger.new_keys} | extended


def check(
    ledger: Ledger,
    deps: NodeDeps,
    config: RunnableConfig,
    action: ToolAction,
    index: int,
    *,
    ask_here: bool = True,
) -> Call | Stop:
    """One call: admitted (to run; or settled and shown to the model: refused, a reminder, a
    human's answer), or the stop it causes. ``ask_here=False`` leaves a call under approval to
    the question its caller asks next (``execute``'s after a crash, about exactly that call)."""
    name, args, step = action.name, action.args, ledger.step
    over = enforce(
        lambda budget: check_before_tool(ledger.usage, budget, name),
        ledger.held,
        ledger.usage,
        config,
        step,
    )
    if over is not None:
        return over
    refusal = refuse(deps, name)
    if refusal is not None:
        return refused(ledger, deps, action, step, refusal)
    earlier = repeats(ledger.index, name, args, deps.policy.loop_detection)
    if earlier:
        return remind(action, step) if earlier <= deps.policy.repeat_reminders else loop(name)
    if name in deps.policy.require_approval and ask_here:
        approved = approve(ledger, deps, action, step) if can_pause(config) else unavailable(name)
        if isinstance(approved, Stop | Call):
            return approved
        args = approved
    thread = str(config.get("configurable", {}).get("thread_id", "-"))
    key = idempotency_key(thread, step, name, args, index)
    return Call(step=step, tool=name, args=args, key=key, id=action.id)


def refuse(deps: NodeDeps, name: str) -> Stop | None:
    """Deny by default: unknown names and names outside the allowlist."""
    if name not in deps.tools:
        return Stop(StopReason.TOOL_MISSING, name, f"there is no tool named {name!r}")
    if name not in deps.allowed:
        return Stop(StopReason.TOOL_DENIED, name, f"the policy does not allow {name!r}")
    return None


def loop(name: str) -> Stop:
    return Stop(
        StopReason.LOOP_DETECTED,
        message=f"{name} was already called with the same arguments in this run",
    )


def remind(action: ToolAction, step: int) -> Call:
    """A repeat the policy answers instead of running it: shown to the model like a refusal
    (``loop_detected`` in the trace's ``error``), so the next repeat stops the run."""
    shown = (
        f"You already called {action.name} with these arguments, and its result is above in "
        "this conversation: use it, call something else, or give your final answer. "
        "Calling it again ends the run."
    )
    outcome = Outcome(ok=False, observation=shown, error=str(StopReason.LOOP_DETECTED))
    return Call(
        step=step, tool=action.name, args=action.args, key="", id=action.id, outcome=outcome
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
    ledger: Ledger, deps: NodeDeps, action: ToolAction, step: int
) -> dict[str, Any] | Call | Stop:
    """Ask a human; the arguments to run with, the call they answered in place of the tool
    (``respond``), or the stop their answer causes. Edited arguments must fit the tool's schema
    (else the human is asked again) and pass the loop check again."""
    name, args = action.name, action.args
    why = f"policy requires a human to approve every {name} call"
    asked = question("approval", name, args, step, why, allowed=deps.policy.decisions_for(name))
    decision = ask(asked, partial(check_args, deps.tools[name]))
    if decision.response is not None:
        return answered(deps, action, step, decision.response)
    if not decision.approved:
        reason = decision.reason or "no reason given"
        return Stop(StopReason.TOOL_REJECTED, name, f"a human rejected {name}: {reason}")
    if decision.args is None or decision.args == args:
        return args
    if is_repeat(ledger.index, name, decision.args, deps.policy.loop_detection):
        return loop(name)
    return decision.args


def answered(deps: NodeDeps, action: ToolAction, step: int, response: str) -> Call:
    """A call a human answered in place of the tool: it counts as a call, its loop key is kept
    (asking again is a repeat), and the answer is its observation."""
    outcome = answered_outcome(response, deps.policy.max_observation_chars, deps.secrets)
    return Call(
        step=step, tool=action.name, args=action.args, key="", id=action.id, outcome=outcome
    )


def refused(
    ledger: Ledger, deps: NodeDeps, action: ToolAction, step: int, why: Stop
) -> Call | Stop:
    """Stop; or, with ``on_tool_error="observe"``, show the model the refusal and its tools.
    A refusal shown to the model still counts as a call, and repeating it is a loop."""
    if deps.policy.on_tool_error == "stop":
        return why
    if is_repeat(ledger.index, action.name, action.args, deps.policy.loop_detection):
        return loop(action.name)
    shown = f"{why.message}. Tools you may call: {sorted(deps.allowed)}"
    outcome = Outcome(ok=False, observation=shown, error=str(why))
    return Call(
        step=step, tool=action.name, args=action.args, key="", id=action.id, outcome=outcome
    )


def stopped(
    state: CoreState, action: ToolAction, stop: Stop, actions: list[ToolAction]
) -> dict[str, Any]:
    """End the run here; the call that stopped it goes into the trace with its stop reason
    (the other calls of its reply never ran), and every call of the reply is answered in the
    conversation: none ran."""
    entry = TraceEntry(
        step=state.usage.steps,
        tool=action.name,
        args_hash=args_hash(action.args),
        ok=False,
        stop_reason=str(stop),
    )
    stopper = f"not run ({stop}): {stop.message}"
    others = f"not run: the run stopped at {action.name} ({stop})"
    answers = [
        result(a.name, a.id, stopper if a is action else others, ok=False)
        for a in actions
        if a.id is not None  # validated before calls had ids: in no message
    ]
    return {**stop.update(), "trace": [dump(entry)], "messages": answers}
