"""Every scenario of every example runs with its scripted model and ends as it says it will."""

from __future__ import annotations

import pytest

from gated_react import examples
from gated_react.examples.runner import run_scripted

CASES = [
    pytest.param(example.name, scenario.name, id=f"{example.name}/{scenario.name}")
    for example in map(examples.get, examples.names())
    for scenario in example.scenarios
]


@pytest.mark.parametrize(("name", "scenario"), CASES)
def test_scenario_ends_as_expected(name: str, scenario: str) -> None:
    example = examples.get(name)
    chosen = example.scenario(scenario)
    result, problems = run_scripted(example, chosen)
    assert problems == []
    assert result["stop_reason"] == chosen.expect.stop_reason
    assert (result["status"] == "ok") == (chosen.expect.stop_reason == "success")
    assert result["message"]


def test_the_seed_experiments_are_all_there() -> None:
    reasons = {s.name: s.expect.stop_reason for s in examples.get("000").scenarios}
    assert reasons == {
        "user-42": "success",
        "user-7": "success",
        "no-search-policy": "tool_denied:search_policy",
        "one-tool-call": "max_tool_calls",
        "missing-tool": "tool_missing:issue_refund",
        "soft-loop": "loop_detected",
    }
