"""observe: the call's outcome joins the history and the trace; then the budgets are checked
before the next decision (this is the conditional edge's input)."""

from __future__ import annotations

from typing import Any

from gated_react._engine.budget_checks import check_before_step
from gated_react._engine.call_keys import args_hash
from gated_react._engine.deps import NodeDeps
from gated_react.state import CoreState, HistoryEntry, ToolAction, TraceEntry, dump


def observe(state: CoreState, *, deps: NodeDeps) -> dict[str, Any]:
    """Append the step; a call that stopped the run is traced but not added to the history."""
    call = state.call
    if call is None or call.outcome is None:
        raise TypeError("observe runs only after a call has an outcome")
    outcome = call.outcome
    entry = TraceEntry(
        step=call.step,
        tool=call.tool,
        args_hash=args_hash(call.args),
        ok=outcome.ok,
        error=None if outcome.ok or state.stop_reason else outcome.error,
        stop_reason=state.stop_reason,
    )
    update: dict[str, Any] = {"trace": [dump(entry)], "call": None}
    if state.stop_reason:
        return update
    step = HistoryEntry(
        step=call.step,
        action=ToolAction(name=call.tool, args=call.args),
        observation=outcome.observation,
    )
    update["history"] = [dump(step)]
    over = check_before_step(state.usage, deps.policy.budget)
    return {**update, **over.update()} if over else update
