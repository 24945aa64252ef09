"""002 data agent, scripted: the total comes from the tools, writes are refused, retries."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from gated_react import build_graph, runs
from gated_react.examples.data_agent import DATABASE
from gated_react.examples.spec import package_files
from gated_react.testing import ScriptedChatModel, call
from scenarios import data_agent
from scenarios.runner import run_scenario
from scenarios.spec import grounded

from ..package.test_data_agent import dump

SEED = data_agent.SEED
EXAMPLE = SEED.example
SHIPPED = Path(str(package_files() / DATABASE))


def run(name: str, workdir: Path) -> dict[str, Any]:
    scenario = SEED.scenario(name)
    model = ScriptedChatModel(replies=list(scenario.script))
    return run_scenario(EXAMPLE, scenario, model, workdir)


def test_the_answer_is_read_from_the_query_and_the_calculator(tmp_path: Path) -> None:
    out = run("completed-total", tmp_path)
    assert out["stop_reason"] == "success"
    query, calc = out["history"][1]["observation"], out["history"][2]["observation"]
    assert query["rows"] == [[11, 141450]]
    assert calc == {"expression": "141450 / 100", "result": 1414.5}
    assert grounded(out["answer"], out) == []
    assert "USD 1,414.50" in out["answer"]
    assert EXAMPLE.policy().protocol == "tools"


def test_a_number_from_the_models_head_is_caught(tmp_path: Path) -> None:
    model = ScriptedChatModel(replies=[call("describe_database"), "Completed orders: USD 1,500."])
    scenario = SEED.scenario("completed-total")
    out = run_scenario(EXAMPLE, scenario, model, tmp_path)
    assert out["stop_reason"] == "success"  # the policy cannot know; the check does
    assert grounded(out["answer"], out) == ["1500"]
    assert scenario.expect.problems(out) == [
        "calls ['describe_database'], expected "
        "['describe_database', 'query_database', 'calculate']",
        "answer lacks 'USD 1,414.50'",
        "answer states numbers no tool returned: ['1500']",
    ]


def test_a_write_is_refused_by_the_tool_and_changes_nothing(tmp_path: Path) -> None:
    EXAMPLE.tools(tmp_path)
    copy = tmp_path / DATABASE
    before = hashlib.sha256(copy.read_bytes()).hexdigest()
    out = run("write-refused", tmp_path)
    assert "not authorized" in out["history"][0]["observation"]
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == before
    assert dump(copy) == dump(SHIPPED)


def test_a_made_up_tool_is_shown_the_real_tools(tmp_path: Path) -> None:
    out = run("unknown-tool", tmp_path)
    assert out["history"][0]["observation"] == (
        "there is no tool named 'web_search'. Tools you may call: "
        "['calculate', 'describe_database', 'query_database']"
    )
    assert out["usage"]["steps"] == 5


def test_a_locked_database_is_retried_and_the_call_counts_once(tmp_path: Path) -> None:
    scenario = SEED.scenario("retry")
    tools = data_agent.flaky_tools(tmp_path)
    flaky = next(t for t in tools if isinstance(t, data_agent.FlakyQuery))
    out = _run_with(scenario, tools, tool_retries=2)
    assert out["stop_reason"] == "success"
    assert flaky.attempts == 2
    assert [t["tool"] for t in out["trace"]].count("query_database") == 1


def test_without_retries_the_lock_is_an_observed_error(tmp_path: Path) -> None:
    scenario = SEED.scenario("retry")
    tools = data_agent.flaky_tools(tmp_path)
    out = _run_with(scenario, tools, tool_retries=0)
    assert out["trace"][1]["error"] == "tool_error:query_database"
    assert "database is locked" in out["history"][1]["observation"]


def _run_with(scenario: Any, tools: list[Any], **changes: Any) -> dict[str, Any]:
    graph = build_graph(
        ScriptedChatModel(replies=list(scenario.script)), tools, policy=EXAMPLE.policy(**changes)
    )
    return dict(runs.run(graph, EXAMPLE.goal))
