"""What each budget allows, checked: a run's spend (and, for the thread's limits, every run's on
the thread) against its limits, before a model call and before a tool call. Each check returns
a Stop whose message carries the numbers, or None; what a spent budget then does (stop, ask a
human to extend it) is ``budgets``'. A spent tool budget the policy observes is answered to the
model in ``ToolCallLimitMiddleware``'s words (``limit_answer``)."""

from __future__ import annotations

import math

from gated_react.policy import Budget, Policy
from gated_react.state import Usage
from gated_react.stops import Stop, StopReason


def check_before_step(usage: Usage, budget: Budget) -> Stop | None:
    """Run before every model decision: steps, active seconds, tokens, cost. Each check asks
    whether what was spent is under the limit, so a figure no comparison holds for (NaN, in
    a model built without validation) counts as over it."""
    if not usage.steps < budget.max_steps:
        return Stop(
            StopReason.MAX_STEPS,
            message=f"max_steps {budget.max_steps} reached ({usage.steps + 1} requested)",
        )
    if (late := check_seconds(usage, budget)) is not None:
        return late
    if budget.max_tokens is not None and not usage.tokens < budget.max_tokens:
        return Stop(
            StopReason.MAX_TOKENS,
            message=f"max_tokens {budget.max_tokens} reached ({usage.tokens} spent)",
        )
    return check_cost(usage, budget)


def check_doubt(doubted: str | None, budget: Budget) -> Stop | None:
    """Before every model decision, with a store key: a spend record that does not verify
    (``Tally.doubted``) leaves tokens, dollars and seconds unknown; the first of them the
    budget limits stops the run (a human cannot extend a limit nobody can check)."""
    if doubted is None:
        return None
    limits = (
        (StopReason.MAX_TOKENS, budget.max_tokens, ""),
        (StopReason.MAX_COST, budget.max_cost, " USD"),
        (StopReason.MAX_SECONDS, budget.max_seconds, ""),
    )
    for reason, limit, unit in limits:
        if limit is not None and math.isfinite(limit):
            return Stop(reason, message=f"{reason} {limit:g}{unit} cannot be checked: {doubted}")
    return None


LEAST_SECONDS = 0.01
"""The least of a run's time in which a call is started: with less left, no model or tool call
could return (a request sent then is paid for nothing), so the time counts as spent."""


def check_seconds(usage: Usage, budget: Budget) -> Stop | None:
    """Active seconds: before a decision, and before calls run (a resume after kills may find
    them spent, or all but a sliver: less than ``LEAST_SECONDS``)."""
    if not budget.max_seconds - usage.seconds >= LEAST_SECONDS:
        return Stop(
            StopReason.MAX_SECONDS,
            message=f"max_seconds {budget.max_seconds:g} reached "
            f"({usage.seconds:.2f} active seconds spent)",
        )
    return None


def check_cost(usage: Usage, budget: Budget) -> Stop | None:
    """Run before every model decision and every tool call: the dollars spent. A cost that
    became unknown (a reply without token counts, a stored figure that is no amount: see
    ``Usage``) cannot be shown to be under the limit."""
    if budget.max_cost is None:
        return None
    if usage.cost is None:
        return Stop(
            StopReason.MAX_COST,
            message=f"max_cost {budget.max_cost:g} USD cannot be checked: {usage.unpriced}",
        )
    if not usage.cost < budget.max_cost:
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


def check_thread_step(whole: Usage | None, budget: Budget) -> Stop | None:
    """Before a model call: the decisions the thread's runs made together (``whole``, None
    when no limit holds across them). A thread's limit is never extended by a human."""
    limit = budget.thread_max_steps
    if whole is None or limit is None or whole.steps < limit:
        return None
    said = (
        f"thread_max_steps {limit} reached ({whole.steps + 1} requested across the thread's runs)"
    )
    return Stop(StopReason.MAX_STEPS, message=said)


def check_thread_tool(whole: Usage | None, budget: Budget, tool: str) -> Stop | None:
    """Before a call: the calls the thread's runs made together, in all and of ``tool``."""
    if whole is None:
        return None
    across = "across the thread's runs"
    limit = budget.thread_max_tool_calls
    if limit is not None and whole.tool_calls + 1 > limit:
        said = f"thread_max_tool_calls {limit} reached ({whole.tool_calls + 1} requested {across})"
        return Stop(StopReason.MAX_TOOL_CALLS, message=said)
    cap, made = budget.thread_tool_limits.get(tool), whole.per_tool.get(tool, 0)
    if cap is not None and made + 1 > cap:
        said = f"thread_tool_limits {tool} {cap} reached ({made + 1} requested {across})"
        return Stop(StopReason.TOOL_LIMIT, tool, said)
    return None


def over_tool_count(usage: Usage, budget: Budget, tool: str) -> Stop | None:
    """The run's total or the tool's cap, when one more call would exceed it."""
    over = check_before_tool(usage, budget, tool)
    return over if over is not None and over.reason in _TOOL_COUNTS else None


_TOOL_COUNTS = frozenset({StopReason.MAX_TOOL_CALLS, StopReason.TOOL_LIMIT})


def observed(policy: Policy, over: Stop) -> bool:
    """Whether a spent tool budget is answered to the model (``Policy.on_tool_limit``)."""
    return policy.on_limit(over.detail if over.reason is StopReason.TOOL_LIMIT else None) == (
        "observe"
    )


def limit_answer(over: Stop) -> str:
    """What the model is told of a call over a tool budget under ``on_tool_limit="observe"``:
    ``ToolCallLimitMiddleware``'s words, so an app reads what it read under ``create_agent``."""
    if over.reason is StopReason.TOOL_LIMIT:
        return f"Tool call limit exceeded. Do not call '{over.detail}' again."
    return "Tool call limit exceeded. Do not make additional tool calls."
