"""The examples registry: names, lookup, policies and tools factories."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from gated_react import Policy, examples
from gated_react.examples import UnknownExample

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
