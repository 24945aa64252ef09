"""002 data agent: native tool calling, read-only SQL over a shipped SQLite file, a calculator.

The numbers in the answer come from tool observations (the query, then the calculator), never
from the model's head. The SQL tool refuses writes by itself (read-only connection plus an
authorizer), an unknown tool becomes an observation that lists the real ones, and a failing
read-only tool is retried with backoff before its error counts.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from gated_react.examples.spec import Example, Expect, Scenario, package_files, script
from gated_react.policy import Budget, Policy
from gated_react.testing import call
from gated_react.tools.calculator import calculate
from gated_react.tools.sql import DescribeDatabase, QueryDatabase

DATABASE = "orders.sqlite"
GOAL = (
    "What is the total amount, in USD, of all completed orders? Use the orders database "
    "(look at its tables first) and the calculator; state the number of orders and the total."
)
TOTAL_SQL = (
    "SELECT COUNT(*) AS orders, SUM(amount_cents) AS total_cents "
    "FROM orders WHERE status = 'completed'"
)


def database_copy(workdir: Path) -> Path:
    """The run's copy of the shipped database (made once, then reused)."""
    target = workdir / DATABASE
    if not target.is_file():
        target.write_bytes((package_files() / DATABASE).read_bytes())
    return target


def tools(workdir: Path) -> list[BaseTool]:
    """describe_database and query_database on the copy, and the calculator."""
    database = database_copy(workdir)
    return [DescribeDatabase(database=database), QueryDatabase(database=database), calculate]


class FlakyQuery(QueryDatabase):
    """query_database whose first ``failures`` attempts find the database locked."""

    failures: int = 1
    attempts: int = 0

    def _run(self, sql: str, **kwargs: Any) -> dict[str, Any]:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise sqlite3.OperationalError("database is locked")
        return super()._run(sql, **kwargs)


def flaky_tools(workdir: Path) -> list[BaseTool]:
    """The same tools, with a database that is locked on the first query attempt."""
    database = database_copy(workdir)
    return [DescribeDatabase(database=database), FlakyQuery(database=database), calculate]


ANSWER = "The 11 completed orders total USD 1,414.50 (141450 cents)."
TOTAL = script(
    call("describe_database"),
    call("query_database", sql=TOTAL_SQL),
    call("calculate", expression="141450 / 100"),
    ANSWER,
)
TOTAL_CALLS = ("describe_database", "query_database", "calculate")

SCENARIOS = (
    Scenario(
        name="completed-total",
        shows="total of completed orders, read from the query and the calculator",
        script=TOTAL,
        expect=Expect("success", TOTAL_CALLS, answer_has=("USD 1,414.50",), grounded=True),
    ),
    Scenario(
        name="write-refused",
        shows="an UPDATE is refused by the SQL tool itself; the data stays as it was",
        script=script(
            call(
                "query_database",
                sql="UPDATE orders SET status = 'completed' WHERE status = 'pending'",
            ),
            "I cannot change orders: the update was refused, the database is read-only.",
        ),
        expect=Expect(
            "success",
            ("query_database",),
            errors=("tool_error:query_database",),
            answer_has=("refused",),
        ),
    ),
    Scenario(
        name="unknown-tool",
        shows="a made-up tool becomes an observation listing the real tools; the model recovers",
        script=script(call("web_search", query="completed orders total"), *TOTAL),
        expect=Expect(
            "success",
            ("web_search", *TOTAL_CALLS),
            errors=("tool_missing:web_search",),
            answer_has=("USD 1,414.50",),
            grounded=True,
        ),
    ),
    Scenario(
        name="retry",
        shows="the database is locked once: the read-only query is retried with backoff",
        changes={"tool_retries": 2},
        tools=flaky_tools,
        script=TOTAL,
        expect=Expect("success", TOTAL_CALLS, answer_has=("USD 1,414.50",), grounded=True),
    ),
)

EXAMPLE = Example(
    name="002-data",
    title="Data agent",
    shows="native tool calls: read-only SQL over a shipped SQLite file plus a calculator",
    goal=GOAL,
    base_policy=Policy(
        protocol="tools",
        on_tool_error="observe",
        tool_timeouts={"query_database": 10.0, "describe_database": 10.0, "calculate": 5.0},
        budget=Budget(max_steps=8, max_tool_calls=6, max_seconds=60),
    ),
    make_tools=tools,
    scenarios=SCENARIOS,
)
