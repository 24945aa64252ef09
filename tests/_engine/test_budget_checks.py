from __future__ import annotations

from gated_react._engine.budget_checks import check_before_step, check_before_tool
from gated_react.policy import Budget
from gated_react.state import Usage
from gated_react.stops import StopReason


def test_step_budget_allows_until_spent_and_names_the_numbers() -> None:
    budget = Budget(max_steps=3)
    assert check_before_step(Usage(steps=2), budget) is None
    stop = check_before_step(Usage(steps=3), budget)
    assert stop is not None
    assert stop.reason is StopReason.MAX_STEPS
    assert stop.message == "max_steps 3 reached (4 requested)"


def test_seconds_and_tokens() -> None:
    budget = Budget(max_seconds=2, max_tokens=100)
    assert check_before_step(Usage(seconds=1.9, tokens=99), budget) is None
    seconds = check_before_step(Usage(seconds=2.5), budget)
    assert seconds is not None
    assert seconds.reason is StopReason.MAX_SECONDS
    assert "max_seconds 2 reached (2.50" in seconds.message
    tokens = check_before_step(Usage(tokens=100), budget)
    assert tokens is not None
    assert tokens.reason is StopReason.MAX_TOKENS
    assert tokens.message == "max_tokens 100 reached (100 spent)"
    assert check_before_step(Usage(tokens=10**9), Budget()) is None  # max_tokens off by default


def test_tool_budgets() -> None:
    budget = Budget(max_tool_calls=5, tool_limits={"search": 2})
    assert check_before_tool(Usage(tool_calls=4, per_tool={"search": 1}), budget, "search") is None
    total = check_before_tool(Usage(tool_calls=5), budget, "other")
    assert total is not None
    assert str(total) == "max_tool_calls"
    assert total.message == "max_tool_calls 5 reached (6 requested)"
    per_tool = check_before_tool(Usage(tool_calls=2, per_tool={"search": 2}), budget, "search")
    assert per_tool is not None
    assert str(per_tool) == "tool_limit:search"
    assert per_tool.message == "tool_limit search 2 reached (3 requested)"
