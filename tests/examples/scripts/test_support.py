"""000 support refund, scripted: the answers' facts, and what each experiment shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gated_react import build_graph, run
from gated_react.testing import ScriptedChatModel
from scenarios import support
from scenarios.runner import run_scenario, run_scripted

SEED = support.SEED
EXAMPLE = SEED.example


def scripted(name: str) -> dict[str, Any]:
    result, problems = run_scripted(EXAMPLE, SEED.scenario(name))
    assert problems == []
    return result


def test_user_42_gets_yes_usd_49_from_the_tools() -> None:
    out = scripted("user-42")
    assert out["answer"].startswith("Yes")
    assert "USD 49" in out["answer"]
    billing = out["history"][1]["observation"]["billing"]
    assert (billing["price_usd"], billing["days_since_first_payment"]) == (49.0, 10)
    assert out["history"][2]["observation"]["matches"][0]["id"] == "refund-v3"


def test_user_7_gets_no() -> None:
    out = scripted("user-7")
    assert out["answer"].startswith("No")
    assert out["history"][1]["observation"]["billing"]["plan"] == "free"
    assert out["history"][2]["observation"]["matches"][0]["id"] == "free-v1"


def test_without_search_policy_on_the_allowlist_the_gate_refuses_it() -> None:
    out = scripted("no-search-policy")
    assert [h["action"]["name"] for h in out["history"]] == ["get_user_profile", "get_user_billing"]
    assert out["trace"][-1] == {
        "step": 3,
        "tool": "search_policy",
        "args_hash": out["trace"][-1]["args_hash"],
        "ok": False,
        "stop_reason": "tool_denied:search_policy",
    }


def test_max_tool_calls_1_the_policy_stops_the_model_that_wanted_more(tmp_path: Path) -> None:
    scenario = SEED.scenario("one-tool-call")
    model = ScriptedChatModel(replies=list(scenario.script))
    out = run_scenario(EXAMPLE, scenario, model, tmp_path)
    assert out["stop_reason"] == "max_tool_calls"
    assert out["message"] == "max_tool_calls 1 reached (2 requested)"
    assert len(out["history"]) == 1
    # The model's second reply was another tool call, not an answer: the policy ended the run.
    assert len(model.requests) == 2
    assert json.loads(str(scenario.script[1]))["kind"] == "tool"


def test_a_tool_that_does_not_exist_is_tool_missing_and_never_runs() -> None:
    out = scripted("missing-tool")
    assert out["trace"][-1]["stop_reason"] == "tool_missing:issue_refund"
    assert [h["action"]["name"] for h in out["history"]] == ["get_user_profile"]


def test_soft_loop_mode_catches_what_exact_mode_lets_through(tmp_path: Path) -> None:
    scenario = SEED.scenario("soft-loop")
    assert scripted("soft-loop")["stop_reason"] == "loop_detected"
    replies = [*scenario.script, support.final("No refund found in the policy.")]
    graph = build_graph(
        ScriptedChatModel(replies=replies), EXAMPLE.tools(tmp_path), policy=EXAMPLE.policy()
    )
    out = run(graph, EXAMPLE.goal)
    assert EXAMPLE.policy().loop_detection == "exact"
    assert out["stop_reason"] == "success"
    assert len(out["history"]) == 2
