"""Every scenario of every example runs with its scripted model and ends as it says it will."""

from __future__ import annotations

from pathlib import Path

import pytest

import scenarios
from gated_react import examples
from scenarios.runner import run_scripted

CASES = [
    pytest.param(seed.example.name, scenario.name, id=f"{seed.example.name}/{scenario.name}")
    for seed in scenarios.SEEDS
    for scenario in seed.scenarios
]


def test_every_example_has_its_scenarios_in_seed_order() -> None:
    assert tuple(seed.example.name for seed in scenarios.SEEDS) == examples.names()
    for name in examples.names():
        assert scenarios.get(name).example is examples.get(name)
    assert scenarios.get("support") is scenarios.get("000-support")


@pytest.mark.parametrize("name", examples.names())
def test_every_seed_is_complete(name: str, tmp_path: Path) -> None:
    seed = scenarios.get(name)
    names = [s.name for s in seed.scenarios]
    assert len(names) == len(set(names))
    for scenario in seed.scenarios:
        assert scenario.script
        assert scenario.shows
        seed.example.policy(**scenario.changes)  # every scenario's policy is valid
    assert seed.scenario() is seed.scenarios[0]


def test_an_unknown_scenario_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="user-42, user-7"):
        scenarios.get("000").scenario("user-99")


@pytest.mark.parametrize(("name", "scenario"), CASES)
def test_scenario_ends_as_expected(name: str, scenario: str) -> None:
    seed = scenarios.get(name)
    chosen = seed.scenario(scenario)
    result, problems = run_scripted(seed.example, chosen)
    assert problems == []
    assert result["stop_reason"] == chosen.expect.stop_reason
    assert (result["status"] == "ok") == (chosen.expect.stop_reason == "success")
    assert result["message"]


def test_the_seed_experiments_are_all_there() -> None:
    reasons = {s.name: s.expect.stop_reason for s in scenarios.get("000").scenarios}
    assert reasons == {
        "user-42": "success",
        "user-7": "success",
        "no-search-policy": "tool_denied:search_policy",
        "one-tool-call": "max_tool_calls",
        "missing-tool": "tool_missing:issue_refund",
        "soft-loop": "loop_detected",
    }
