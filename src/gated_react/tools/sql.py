"""Read-only SQL over one SQLite file: opened read-only, one statement, an authorizer that allows
reads only, a row cap and a time limit. Each query runs in a worker process (``_sql_worker``)
that is killed at the time limit; the module docstring there says how the file is opened."""

from __future__ import annotations

import marshal
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from gated_react.errors import GatedReactError
from gated_react.tools._sql_worker import MAX_RESULT_BYTES, MAX_ROWS, MAX_SECONDS, MAX_VALUE_BYTES

__all__ = [
    "MAX_RESULT_BYTES",
    "MAX_ROWS",
    "MAX_SECONDS",
    "MAX_VALUE_BYTES",
    "DescribeDatabase",
    "MissingDatabase",
    "QueryDatabase",
    "QueryError",
    "run_query",
    "sql_tools",
]

WORKER = Path(__file__).with_name("_sql_worker.py")


class QueryError(GatedReactError, ValueError):
    """A query was refused, failed, or was stopped at the time limit."""


class MissingDatabase(GatedReactError, FileNotFoundError):
    """The database file does not exist (SQLite would create an empty one)."""


class QueryArgs(BaseModel):
    sql: str = Field(min_length=1, max_length=4000, description="One SELECT statement")


class NoArgs(BaseModel):
    pass


def run_query(database: Path, sql: str, max_rows: int = MAX_ROWS) -> dict[str, Any]:
    """Rows of one read-only statement, at most ``max_rows`` (``truncated`` tells).

    The worker is killed, and waited for, when ``MAX_SECONDS`` have passed since the call:
    nothing of the query runs on after that, whatever single step it was in.
    """
    if not database.is_file():
        problem = "is not a file" if database.exists() else "does not exist"
        raise MissingDatabase(f"database file {database} {problem}")
    request = marshal.dumps((str(database.resolve()), sql, max_rows, MAX_SECONDS))
    try:
        # run() kills the worker on a timeout and on any exception, Ctrl-C included.
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(WORKER)],
            input=request,
            capture_output=True,
            timeout=MAX_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise QueryError(
            f"query refused or failed: stopped at the time limit of {MAX_SECONDS:g} s"
        ) from None
    except OSError as exc:
        raise QueryError(
            f"query refused or failed: cannot start the query process: {exc}"
        ) from None
    return _reply(done)


def _reply(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    try:
        status, value = marshal.loads(done.stdout)
    except (EOFError, ValueError, TypeError):
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["no output"]
        raise QueryError(
            "query refused or failed: the query process ended without a result "
            f"(exit code {done.returncode}: {lines[-1][:200]})"
        ) from None
    if status != "ok":
        raise QueryError(f"query refused or failed: {value}")
    return value  # type: ignore[no-any-return]


class QueryDatabase(BaseTool):
    """Run one read-only SELECT on the database; writes and several statements are refused."""

    name: str = "query_database"
    description: str = (
        "Run one read-only SQL SELECT statement on the SQLite database and return the rows "
        f"(at most {MAX_ROWS}). Writes, ATTACH, PRAGMA and several statements are refused."
    )
    args_schema: type[BaseModel] = QueryArgs
    metadata: dict[str, Any] | None = {"idempotent": True}  # noqa: RUF012 (pydantic field)
    database: Path

    def _run(self, sql: str, **_: Any) -> dict[str, Any]:
        return run_query(self.database, sql)


class DescribeDatabase(BaseTool):
    """List the tables with their CREATE statements."""

    name: str = "describe_database"
    description: str = "List the database's tables with their CREATE TABLE statements."
    args_schema: type[BaseModel] = NoArgs
    metadata: dict[str, Any] | None = {"idempotent": True}  # noqa: RUF012 (pydantic field)
    database: Path

    def _run(self, **_: Any) -> dict[str, Any]:
        found = run_query(self.database, "SELECT name, sql FROM sqlite_master WHERE type = 'table'")
        return {"tables": dict(found["rows"])}


def sql_tools(database: Path | None) -> list[BaseTool]:
    """The SQL toolkit bound to one database file."""
    if database is None:
        raise ValueError("the sql toolkit needs a database file (--database PATH)")
    return [QueryDatabase(database=database), DescribeDatabase(database=database)]
