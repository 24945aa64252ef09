"""002 data agent: native tool calling, read-only SQL over a shipped SQLite file, a calculator.

The numbers in the answer come from tool observations (the query, then the calculator), never
from the model's head. The SQL tool refuses writes by itself (read-only connection plus an
authorizer), an unknown tool becomes an observation that lists the real ones, and a failing
read-only tool is retried with backoff before its error counts.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool

from gated_react.examples.spec import Example, package_files
from gated_react.policy import Budget, Policy
from gated_react.tools.calculator import calculate
from gated_react.tools.sql import DescribeDatabase, QueryDatabase

DATABASE = "orders.sqlite"
GOAL = (
    "What is the total amount, in USD, of all completed orders? Use the orders database "
    "(look at its tables first) and the calculator; state the number of orders and the total."
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
)
