"""Read-only SQL over one SQLite file: opened read-only, one statement, an authorizer that allows
reads only, a row cap and a time limit."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

MAX_ROWS = 50
MAX_SECONDS = 5.0
MAX_VALUE_BYTES = 1_000_000

# What a query may do; everything else (writes, ATTACH, PRAGMA, ...) is denied by the authorizer.
_ALLOWED_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})


class QueryArgs(BaseModel):
    sql: str = Field(min_length=1, max_length=4000, description="One SELECT statement")


class NoArgs(BaseModel):
    pass


def _authorize(action: int, _arg1: str | None, arg2: str | None, *_: Any) -> int:
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def _connect(database: Path) -> sqlite3.Connection:
    if not database.is_file():
        raise FileNotFoundError(f"database file {database} does not exist")
    conn = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True, timeout=2)
    conn.execute("PRAGMA query_only = ON")
    # No single value above MAX_VALUE_BYTES: zeroblob(5e8) would allocate the memory at once.
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.execute("SELECT count(*) FROM sqlite_master")  # load the schema before the authorizer
    conn.set_authorizer(_authorize)
    return conn


def run_query(database: Path, sql: str, max_rows: int = MAX_ROWS) -> dict[str, Any]:
    """Rows of one read-only statement, at most ``max_rows`` (``truncated`` tells)."""
    deadline = time.monotonic() + MAX_SECONDS
    conn = _connect(database)
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cursor = conn.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows = cursor.fetchmany(max_rows + 1)
    except sqlite3.Error as exc:
        raise ValueError(f"query refused or failed: {exc}") from None
    finally:
        conn.close()
    return {
        "columns": columns,
        "rows": [list(row) for row in rows[:max_rows]],
        "row_count": min(len(rows), max_rows),
        "truncated": len(rows) > max_rows,
    }


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
