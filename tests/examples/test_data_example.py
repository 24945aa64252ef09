"""002 data agent: the total comes from the shipped SQLite file, writes are refused, retries."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gated_react import build_graph, examples
from gated_react.examples import data_agent, orders_db
from gated_react.examples.runner import run_scenario
from gated_react.examples.spec import grounded, package_files
from gated_react.testing import ScriptedChatModel, call

EXAMPLE = examples.get("002-data")
SHIPPED = Path(str(package_files() / data_agent.DATABASE))


def run(name: str, workdir: Path) -> dict[str, Any]:
    scenario = EXAMPLE.scenario(name)
    model = ScriptedChatModel(replies=list(scenario.script))
    return run_scenario(EXAMPLE, scenario, model, workdir)


def dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_the_shipped_database_is_what_the_build_script_writes(tmp_path: Path) -> None:
    orders_db.build(tmp_path / "fresh.sqlite")
    assert dump(SHIPPED) == dump(tmp_path / "fresh.sqlite")
    with pytest.raises(FileExistsError):
        orders_db.build(tmp_path / "fresh.sqlite")


def test_the_database_has_orders_with_products_amounts_and_statuses() -> None:
    conn = sqlite3.connect(f"{SHIPPED.as_uri()}?mode=ro", uri=True)
    try:
        statuses = dict(conn.execute("SELECT status, COUNT(*) FROM orders GROUP BY status"))
        joined = conn.execute(
            "SELECT COUNT(*) FROM orders o JOIN products p ON p.id = o.product_id "
            "WHERE o.amount_cents = p.unit_price_cents * o.quantity"
        ).fetchone()[0]
        total = conn.execute(
            "SELECT SUM(amount_cents) FROM orders WHERE status = 'completed'"
        ).fetchone()[0]
    finally:
        conn.close()
    assert set(statuses) == {"completed", "pending", "cancelled", "refunded"}
    assert joined == sum(statuses.values()) == len(orders_db.ORDERS)
    assert (statuses["completed"], total) == (11, 141450)


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
    scenario = EXAMPLE.scenario("completed-total")
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
    copy = tmp_path / data_agent.DATABASE
    before = hashlib.sha256(copy.read_bytes()).hexdigest()
    out = run("write-refused", tmp_path)
    assert "not authorized" in out["history"][0]["observation"]
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == before
    assert dump(copy) == dump(SHIPPED)


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM orders",
        "INSERT INTO orders VALUES (1, 'x', 1, 1, 1, 'completed', '2026-01-01')",
        "DROP TABLE orders",
        "SELECT 1; DELETE FROM orders",
        "ATTACH DATABASE 'other.sqlite' AS other",
        "PRAGMA writable_schema = ON",
        "CREATE TABLE notes (x)",
    ],
)
def test_the_sql_tool_refuses_every_kind_of_write(tmp_path: Path, sql: str) -> None:
    query = {t.name: t for t in EXAMPLE.tools(tmp_path)}["query_database"]
    with pytest.raises(ValueError, match="refused or failed"):
        query.invoke({"sql": sql})
    assert dump(tmp_path / data_agent.DATABASE) == dump(SHIPPED)


def test_a_made_up_tool_is_shown_the_real_tools(tmp_path: Path) -> None:
    out = run("unknown-tool", tmp_path)
    assert out["history"][0]["observation"] == (
        "there is no tool named 'web_search'. Tools you may call: "
        "['calculate', 'describe_database', 'query_database']"
    )
    assert out["usage"]["steps"] == 5


def test_a_locked_database_is_retried_and_the_call_counts_once(tmp_path: Path) -> None:
    scenario = EXAMPLE.scenario("retry")
    tools = data_agent.flaky_tools(tmp_path)
    flaky = next(t for t in tools if isinstance(t, data_agent.FlakyQuery))
    out = _run_with(scenario, tools, tool_retries=2)
    assert out["stop_reason"] == "success"
    assert flaky.attempts == 2
    assert [t["tool"] for t in out["trace"]].count("query_database") == 1


def test_without_retries_the_lock_is_an_observed_error(tmp_path: Path) -> None:
    scenario = EXAMPLE.scenario("retry")
    tools = data_agent.flaky_tools(tmp_path)
    out = _run_with(scenario, tools, tool_retries=0)
    assert out["trace"][1]["error"] == "tool_error:query_database"
    assert "database is locked" in out["history"][1]["observation"]


def _run_with(scenario: Any, tools: list[Any], **changes: Any) -> dict[str, Any]:
    graph = build_graph(
        ScriptedChatModel(replies=list(scenario.script)), tools, policy=EXAMPLE.policy(**changes)
    )
    return dict(graph.invoke({"goal": EXAMPLE.goal}))
