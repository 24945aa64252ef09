"""Budget checks, named for when they run. Each returns a Stop whose message carries the numbers."""

from __future__ import annotations

from gated_react.policy import Budget
from gated_react.state import Usage
from gated_react.stops import Stop, StopReason


def check_before_step(usage: Usage, budget: Budget) -> Stop | None:
    """Run before every model decision: steps, active seconds, tokens, cost."""
    if usage.steps >= budget.max_steps:
        return Stop(
            StopReason.MAX_STEPS,
            message=f"max_steps {budget.max_steps} reached ({usage.steps + 1} requested)",
        )
    if usage.seconds >= budget.max_seconds:
        return Stop(
            StopReason.MAX_SECONDS,
            message=f"max_seconds {budget.max_seconds:g} reached "
            f"({usage.seconds:.2f} active seconds spent)",
        )
    if budget.max_tokens is not None and usage.tokens >= budget.max_tokens:
        return Stop(
            StopReason.MAX_TOKENS,
            message=f"max_tokens {budget.max_tokens} reached ({usage.tokens} spent)",
        )
    return check_cost(usage, budget)


def check_cost(usage: Usage, budget: Budget) -> Stop | None:
    """Run before every model decision and every tool call: the dollars spent. A cost that
    became unknown (a reply without token counts) cannot be shown to be under the limit."""
    if budget.max_cost is None:
        return None
    if usage.cost is None:
        return Stop(
            StopReason.MAX_COST,
            message=f"max_cost {budget.max_cost:g} USD cannot be checked: {usage.unpriced}",
        )
    if usage.cost >= budget.max_cost:
        return Stop(
            StopReason.MAX_COST,
            message=f"max_cost {budget.max_cost:g} USD reached ({usage.cost:.6f} USD spent)",
        )
    return None


def check_before_tool(usage: Usage, budget: Budget, tool: str) -> Stop | None:
    """Run in the gate before a call: the run's total, the tool's own cap, the cost."""
    calls, calls_of_tool = usage.tool_calls, usage.per_tool.get(tool, 0)
    if calls + 1 > budget.max_tool_calls:
        return Stop(
            StopReason.MAX_TOOL_CALLS,
            message=f"max_tool_calls {budget.max_tool_calls} reached ({calls + 1} requested)",
        )
    cap = budget.tool_limits.get(tool)
    if cap is not None and calls_of_tool + 1 > cap:
        return Stop(
            StopReason.TOOL_LIMIT,
            tool,
            message=f"tool_limit {tool} {cap} reached ({calls_of_tool + 1} requested)",
        )
    return check_cost(usage, budget)
