"""The examples registry: names, lookup, policies, tools factories and the outcome checker."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from gated_react import Policy, examples
from gated_react.examples import UnknownExample
from gated_react.examples.spec import Expect, grounded, numbers

NAMES = ("000-support", "001-coding", "002-data", "003-search")


def test_names_are_the_four_seeds_in_order() -> None:
    assert examples.names() == NAMES


@pytest.mark.parametrize(
    ("asked", "name"),
    [
        ("000-support", "000-support"),
        ("000", "000-support"),
        ("support", "000-support"),
        (" Coding ", "001-coding"),
        ("002", "002-data"),
        ("search", "003-search"),
    ],
)
def test_get_accepts_name_number_or_word(asked: str, name: str) -> None:
    assert examples.get(asked).name == name


def test_an_unknown_name_is_one_line_listing_the_valid_names() -> None:
    with pytest.raises(UnknownExample) as caught:
        examples.get("004-email")
    message = str(caught.value)
    assert "\n" not in message
    assert "'004-email'" in message
    for name in NAMES:
        assert name in message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", NAMES)
def test_every_example_is_complete(name: str, tmp_path: Path) -> None:
    example = examples.get(name)
    assert example.goal.strip()
    assert example.title
    assert example.shows
    assert isinstance(example.policy(), Policy)
    tools = example.tools(tmp_path / "work")
    assert tools
    assert len({t.name for t in tools}) == len(tools)
    registered = {t.name for t in tools}
    assert example.policy().allowed(frozenset(registered))  # something is callable
    names = [s.name for s in example.scenarios]
    assert len(names) == len(set(names))
    for scenario in example.scenarios:
        assert scenario.script
        assert scenario.shows
        example.policy(**scenario.changes)  # every scenario's policy is valid
    assert example.scenario() is example.scenarios[0]


def test_policy_changes_are_validated_and_budget_fields_may_be_top_level() -> None:
    example = examples.get("000")
    changed = example.policy(max_tool_calls=1, loop_detection="normalized")
    assert changed.budget.max_tool_calls == 1
    assert changed.budget.max_steps == example.base_policy.budget.max_steps
    assert changed.loop_detection == "normalized"
    assert changed.protocol == "json"
    assert example.policy() == example.base_policy
    with pytest.raises(ValidationError, match="loop_detektion"):
        example.policy(loop_detektion="off")
    with pytest.raises(ValidationError):
        example.policy(max_tool_calls=-1)


def test_an_unknown_scenario_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="user-42, user-7"):
        examples.get("000").scenario("user-99")


def test_numbers_are_normalized() -> None:
    assert numbers("USD 1,414.50 from 11 orders; 31 °C + 100 = 131.0, 2026-03-02") == [
        "1414.5",
        "11",
        "31",
        "100",
        "131",
        "2026",
        "3",
        "2",
    ]


def test_grounded_flags_numbers_no_tool_returned() -> None:
    result = {"history": [{"observation": {"rows": [[11, 141450]]}}]}
    assert grounded("11 orders, 141,450 cents", result) == []
    assert grounded("11 orders, USD 2,000", result) == ["2000"]
    assert grounded("plus 100", result, goal="what is it plus 100?") == []


def test_expect_reports_every_difference() -> None:
    result = {
        "stop_reason": "success",
        "answer": "Yes, USD 50.",
        "trace": [{"tool": "a", "ok": True}, {"tool": "b", "ok": False, "error": "tool_error:b"}],
        "history": [{"observation": "49"}],
    }
    assert Expect("success", ("a", "b"), ("tool_error:b",), ("usd",)).problems(result) == []
    problems = Expect("max_steps", ("a",), (), ("USD 49",), grounded=True).problems(result)
    assert len(problems) == 5
    assert problems[0] == "stop_reason 'success', expected 'max_steps'"
