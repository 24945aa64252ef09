"""003 search and calculate, scripted: format reminders, and a slow tool under the policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gated_react.testing import ScriptedChatModel
from scenarios import search_calculate
from scenarios.runner import run_scenario

SEED = search_calculate.SEED
EXAMPLE = SEED.example


def run(name: str, workdir: Path) -> tuple[dict[str, Any], ScriptedChatModel]:
    scenario = SEED.scenario(name)
    model = ScriptedChatModel(replies=list(scenario.script))
    out = run_scenario(EXAMPLE, scenario, model, workdir)
    assert scenario.expect.problems(out, EXAMPLE.goal) == []
    return out, model


def test_search_and_calculate_give_the_answer(tmp_path: Path) -> None:
    out, _ = run("beijing-plus-100", tmp_path)
    found = out["history"][0]["observation"]["results"]
    assert found[0]["id"] == "weather-beijing"
    assert "high 31 °C" in found[0]["text"]
    assert out["history"][1]["observation"] == {"expression": "31 + 100", "result": 131}


def test_a_malformed_reply_gets_a_format_reminder(tmp_path: Path) -> None:
    out, model = run("format-retry", tmp_path)
    assert out["usage"]["steps"] == 4  # the reminder's try counts as a step
    reminder = model.requests[1][-1].content
    assert "rejected (no_action" in reminder
    assert "required format" in reminder
    assert all("rejected" not in str(m.content) for m in model.requests[2])


def test_reminders_stop_after_max_invalid_retries(tmp_path: Path) -> None:
    out, model = run("format-gives-up", tmp_path)
    assert len(model.requests) == EXAMPLE.policy().max_invalid_retries + 1
    assert out["trace"] == []


TIMED_OUT = (
    "live_weather did not return within 0.3 s; it runs on in its thread (a call made "
    "synchronously cannot be stopped) and may still finish"
)


def test_a_timeout_is_observed_and_the_model_falls_back(tmp_path: Path) -> None:
    out, _ = run("timeout-continue", tmp_path)
    assert out["history"][0]["observation"] == TIMED_OUT
    assert out["trace"][0]["ok"] is False
    assert out["usage"]["seconds"] >= search_calculate.DEMO_TIMEOUT


def test_the_same_timeout_stops_the_run_by_default(tmp_path: Path) -> None:
    out, model = run("timeout-stop", tmp_path)
    assert out["message"] == TIMED_OUT
    # the call ran and failed: it is in the history with its outcome, and nothing after it
    (entry,) = out["history"]
    assert (entry["action"]["name"], entry["ok"]) == ("live_weather", False)
    assert entry["observation"] == TIMED_OUT
    assert len(model.requests) == 1


def test_calling_the_timed_out_tool_again_is_a_loop(tmp_path: Path) -> None:
    out, _ = run("timeout-no-retry", tmp_path)
    assert len(out["history"]) == 1
    assert out["trace"][1]["stop_reason"] == "loop_detected"
