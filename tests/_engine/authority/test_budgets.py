from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from gated_react import Policy, Price, build_graph, open_checkpointer, run
from gated_react._engine.authority.limits import check_before_step, check_before_tool, check_doubt
from gated_react.policy import Budget
from gated_react.runs import run_book
from gated_react.state import Usage
from gated_react.stops import StopReason
from gated_react.testing import ScriptedChatModel, call


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


def test_seconds_stop_exactly_at_the_limit() -> None:
    budget = Budget(max_seconds=2)
    assert check_before_step(Usage(seconds=1.99), budget) is None
    stop = check_before_step(Usage(seconds=2.0), budget)
    assert stop is not None
    assert stop.message == "max_seconds 2 reached (2.00 active seconds spent)"


def test_tokens_stop_exactly_at_the_limit() -> None:
    budget = Budget(max_tokens=100)
    assert check_before_step(Usage(tokens=99), budget) is None
    assert check_before_step(Usage(tokens=100), budget) is not None


def test_steps_are_checked_before_seconds_and_seconds_before_tokens() -> None:
    budget = Budget(max_steps=1, max_seconds=1, max_tokens=1)
    spent = Usage(steps=1, seconds=1, tokens=1)
    assert str(check_before_step(spent, budget)) == "max_steps"
    assert str(check_before_step(spent.model_copy(update={"steps": 0}), budget)) == "max_seconds"
    last = spent.model_copy(update={"steps": 0, "seconds": 0.0})
    assert str(check_before_step(last, budget)) == "max_tokens"


def test_a_capped_tools_first_call_runs_even_with_a_cap_of_one() -> None:
    budget = Budget(tool_limits={"search": 1})
    assert check_before_tool(Usage(), budget, "search") is None
    assert check_before_tool(Usage(tool_calls=1, per_tool={"other": 1}), budget, "search") is None
    second = check_before_tool(Usage(tool_calls=1, per_tool={"search": 1}), budget, "search")
    assert second is not None
    assert second.message == "tool_limit search 1 reached (2 requested)"


def test_a_cap_of_two_allows_exactly_two_calls() -> None:
    budget = Budget(tool_limits={"search": 2})
    assert check_before_tool(Usage(), budget, "search") is None
    assert check_before_tool(Usage(tool_calls=1, per_tool={"search": 1}), budget, "search") is None
    third = check_before_tool(Usage(tool_calls=2, per_tool={"search": 2}), budget, "search")
    assert third is not None
    assert third.detail == "search"


def test_the_total_allows_exactly_max_tool_calls() -> None:
    budget = Budget(max_tool_calls=2)
    assert check_before_tool(Usage(tool_calls=1), budget, "any") is None
    assert str(check_before_tool(Usage(tool_calls=2), budget, "any")) == "max_tool_calls"


def test_the_total_is_checked_before_the_tools_cap() -> None:
    budget = Budget(max_tool_calls=1, tool_limits={"search": 1})
    spent = Usage(tool_calls=1, per_tool={"search": 1})
    assert str(check_before_tool(spent, budget, "search")) == "max_tool_calls"


def test_cost_is_checked_before_a_step_and_before_a_tool_call() -> None:
    budget = Budget(max_cost=0.01)
    assert check_before_step(Usage(cost=0.0099), budget) is None
    step = check_before_step(Usage(cost=0.01), budget)
    assert step is not None
    assert step.reason is StopReason.MAX_COST
    assert step.message == "max_cost 0.01 USD reached (0.010000 USD spent)"
    tool = check_before_tool(Usage(cost=0.02), budget, "search")
    assert tool is not None
    assert str(tool) == "max_cost"
    assert check_before_step(Usage(cost=5.0), Budget()) is None  # max_cost off by default


def test_a_cost_that_became_unknown_cannot_pass_a_cost_budget() -> None:
    unknown = Usage(cost=None, unpriced="a reply of x reported no tokens")
    stop = check_before_step(unknown, Budget(max_cost=1))
    assert stop is not None
    assert stop.reason is StopReason.MAX_COST
    assert stop.message == "max_cost 1 USD cannot be checked: a reply of x reported no tokens"
    assert check_before_step(unknown, Budget()) is None


def test_usage_is_finite_a_nan_or_infinite_cost_is_unknown_and_stops_a_cost_budget() -> None:
    """Issue 28: NaN compares false, so a cost edited to NaN never reached ``max_cost``."""
    for bad in (math.nan, math.inf, -math.inf, -1.0, -1):
        usage = Usage.model_validate({"cost": bad, "seconds": 1.0})
        assert usage.cost is None
        assert usage.unpriced is not None
        assert f"usage.cost was {bad}" in usage.unpriced
        stop = check_before_step(usage, Budget(max_cost=1))
        assert stop is not None
        assert stop.reason is StopReason.MAX_COST
        assert "cannot be checked" in stop.message
    honest = Usage.model_validate({"cost": 0.25, "unpriced": None})
    assert (honest.cost, honest.unpriced) == (0.25, None)


def test_non_finite_seconds_count_as_spent() -> None:
    for bad in (math.nan, math.inf):
        usage = Usage.model_validate({"seconds": bad})
        assert math.isfinite(usage.seconds)
        stop = check_before_step(usage, Budget(max_seconds=20))
        assert stop is not None
        assert stop.reason is StopReason.MAX_SECONDS
    assert Usage.model_validate({"seconds": -5.0}).seconds == 0.0


def test_a_nan_that_skipped_validation_is_over_every_budget() -> None:
    """Budgets compare ``spent < limit``: a NaN (a model built without validation) fails it."""
    ghost = Usage.model_construct(cost=math.nan, seconds=math.nan, unpriced=None)
    assert str(check_before_step(ghost, Budget())) == "max_seconds"
    assert str(check_before_tool(ghost, Budget(max_cost=1), "any")) == "max_cost"


@tool
def lookup(n: int) -> str:
    """Look something up."""
    LOOKED_UP.append(n)
    return f"found {n}"


LOOKED_UP: list[int] = []


@pytest.mark.parametrize(
    "edit",
    [
        {"usage": {"cost": math.nan}},  # issue 28: NaN compares false, so max_cost never held
        {"usage": {"cost": 0.0}},  # a cost edited lower bought as much spend again
        {"step": None},  # a fresh step, as if the run had just begun
    ],
    ids=["cost-nan", "cost-zero", "step-cleared"],
)
def test_a_state_edit_buys_no_spend_the_record_holds_max_cost(
    tmp_path: Path, edit: dict[str, Any]
) -> None:
    """After a ``max_cost`` stop, an edit through the state API on the run's last checkpoint
    before its next decision, then a resume: before, a cost edited to NaN ran every call the
    script had left, and one edited to 0 as many again. Budgets count the run's record of what
    each model call cost, which no state edit reaches: nothing more runs."""
    LOOKED_UP.clear()
    policy = Policy(
        budget=Budget(max_steps=30, max_tool_calls=30, max_seconds=600, max_cost=1.0),
        prices={"scripted": Price(input=500.0, output=500.0)},  # 0.1 to 0.2 USD a step
    )
    replies = [call("lookup", n=n) for n in range(1, 30)]
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        graph = build_graph(
            ScriptedChatModel(replies=replies), [lookup], policy=policy, checkpointer=saver
        )
        first = run(graph, "look", thread_id="t")
        assert first["stop_reason"] == "max_cost"
        ran = list(LOOKED_UP)
        assert ran
        cfg: Any = {"configurable": {"thread_id": "t"}}
        last = next(s for s in graph.get_state_history(cfg) if s.next == ("decide",))
        edited = graph.update_state(last.config, edit, as_node="observe")
        out = graph.invoke(None, edited)
        spent = run_book(saver, "t").tally.usage()
    assert ran == LOOKED_UP
    assert out["stop_reason"] == "max_cost"
    assert "max_cost 1 USD reached" in out["message"]
    assert spent.cost is not None
    assert spent.cost > 1.0


@pytest.mark.parametrize(
    ("budget", "reason", "limit"),
    [
        (Budget(max_tokens=250), StopReason.MAX_TOKENS, "max_tokens 250"),
        (Budget(max_cost=0.5), StopReason.MAX_COST, "max_cost 0.5 USD"),
        (Budget(), StopReason.MAX_SECONDS, "max_seconds 20"),
    ],
)
def test_a_spend_in_doubt_stops_the_first_limit_on_it(
    budget: Budget, reason: StopReason, limit: str
) -> None:
    doubted = "its paid record of m1 does not verify with the store key (edited, forged or copied)"
    stop = check_doubt(doubted, budget)
    assert stop is not None
    assert (stop.reason, stop.message) == (reason, f"{limit} cannot be checked: {doubted}")
    assert check_doubt(None, budget) is None
    assert check_doubt(doubted, Budget(max_seconds=math.inf)) is None  # nothing it limits
