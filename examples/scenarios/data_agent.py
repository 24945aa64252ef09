"""002 data agent, scripted: the total of completed orders, a refused write, a made-up tool and
a database locked once (retried with backoff).

The example itself (goal, policy, the SQL tools on a copy of the shipped database, the
calculator) is ``gated_react.examples.data_agent``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from gated_react.examples.data_agent import EXAMPLE, database_copy
from gated_react.testing import call
from gated_react.tools.calculator import calculate
from gated_react.tools.sql import DescribeDatabase, QueryDatabase
from scenarios.spec import Expect, Scenario, Seed, script

TOTAL_SQL = (
    "SELECT COUNT(*) AS orders, SUM(amount_cents) AS total_cents "
    "FROM orders WHERE status = 'completed'"
)


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
    """The example's tools, with a database that is locked on the first query attempt."""
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

SEED = Seed(EXAMPLE, SCENARIOS)
