"""The scripts in examples/ as a user runs them: one command each, scripted or on a model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import scenarios
from gated_react import examples

from ...support.openai_server import FakeOpenAI, reply, tool_call
from ...support.reaping import PATIENCE

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = {
    "000-support": "examples/000_support.py",
    "001-coding": "examples/001_coding.py",
    "002-data": "examples/002_data.py",
    "003-search": "examples/003_search.py",
}


def run_script(script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run(
        [sys.executable, script, *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )


def test_there_is_one_script_per_example() -> None:
    assert tuple(SCRIPTS) == examples.names()
    assert sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.py")) == sorted(
        SCRIPTS.values()
    )


@pytest.mark.parametrize(("name", "script"), SCRIPTS.items())
def test_each_script_runs_all_its_scenarios_scripted(name: str, script: str) -> None:
    done = run_script(script)
    count = len(scenarios.get(name).scenarios)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{count} of {count} scenarios ended as expected" in done.stdout
    assert done.stdout.count("[ok]") == count
    assert "Traceback" not in done.stderr


def test_json_output_is_one_result_per_line() -> None:
    done = run_script(SCRIPTS["000-support"], "--scenario", "user-7", "--json")
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    result = json.loads(line)
    assert (result["scenario"], result["stop_reason"], result["problems"]) == (
        "user-7",
        "success",
        [],
    )


def test_bad_input_is_a_clear_error_not_a_traceback() -> None:
    done = run_script(SCRIPTS["000-support"], "--scenario", "nope")
    assert done.returncode == 2
    assert "invalid choice: 'nope'" in done.stderr
    done = run_script(SCRIPTS["000-support"], OPENAI_TIMEOUT_SECONDS="soon", OPENAI_API_KEY="k")
    assert done.returncode == 2
    assert done.stdout.startswith("error: bad setting OPENAI_TIMEOUT_SECONDS")
    assert "Traceback" not in done.stderr


def _action(kind: str, **fields: Any) -> Any:
    return reply(json.dumps({"kind": kind, **fields}))


def test_support_runs_on_a_model_server_with_the_json_protocol() -> None:
    script = [
        _action("tool", name="get_user_profile", args={"user_id": 42}),
        _action("tool", name="get_user_billing", args={"user_id": 42}),
        _action("tool", name="search_policy", args={"query": "refund"}),
        _action("final", answer="Yes, USD 49 within the 14-day window."),
    ]
    with FakeOpenAI(script) as server:
        done = run_script(SCRIPTS["000-support"], OPENAI_BASE_URL=server.base_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "000-support / user-42 on gpt-4.1-mini" in done.stdout
    assert "answer: Yes, USD 49" in done.stdout
    assert len(server.requests) == 4
    assert server.requests[0]["response_format"]["type"] == "json_schema"


def test_the_data_agent_uses_native_tool_calls_on_a_model_server() -> None:
    script = [
        tool_call(
            "query_database", sql="SELECT SUM(amount_cents) FROM orders WHERE status = 'completed'"
        ),
        tool_call("calculate", expression="141450 / 100"),
        reply("Completed orders total USD 1414.5."),
    ]
    with FakeOpenAI(script) as server:
        done = run_script(SCRIPTS["002-data"], "--json", OPENAI_BASE_URL=server.base_url)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["history"][0]["observation"]["rows"] == [[141450]]
    assert result["answer"] == "Completed orders total USD 1414.5."
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert offered == {"describe_database", "query_database", "calculate"}


def test_the_coding_agent_sends_a_stop_sequence_and_reads_brackets() -> None:
    script = [
        reply("Thought: run them\nAction: run_tests[tests/test_cart.py]"),
        reply("Thought: done\nAction: finish[total_cents ignores quantity]"),
    ]
    with FakeOpenAI(script) as server:
        done = run_script(SCRIPTS["001-coding"], "--json", OPENAI_BASE_URL=server.base_url)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == "total_cents ignores quantity"
    assert result["history"][0]["observation"]["passed"] is False
    assert server.requests[0]["stop"] == ["\nObservation:"]


def test_a_model_run_that_stops_exits_1_and_scripted_wins_when_asked() -> None:
    with FakeOpenAI([reply("no idea")] * 3) as server:
        done = run_script(SCRIPTS["003-search"], OPENAI_BASE_URL=server.base_url)
        scripted = run_script(
            SCRIPTS["003-search"],
            "--scripted",
            "--scenario",
            "format-retry",
            OPENAI_BASE_URL=server.base_url,
        )
    assert done.returncode == 1
    assert "invalid_action:no_action after 3 steps" in done.stdout
    assert len(server.requests) == 3
    assert scripted.returncode == 0
    assert "1 of 1 scenarios ended as expected" in scripted.stdout
