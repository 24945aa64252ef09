from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gated_react.tools.sql import MAX_ROWS, run_query, sql_tools


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, product TEXT, amount REAL, status TEXT)")
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?)",
            [(i, f"p{i}", float(i), "completed" if i % 2 else "pending") for i in range(1, 201)],
        )
    return path


def test_select_and_row_cap(db: Path) -> None:
    total = run_query(db, "SELECT SUM(amount) AS total FROM orders WHERE status = 'completed'")
    assert total == {"columns": ["total"], "rows": [[10000.0]], "row_count": 1, "truncated": False}
    many = run_query(db, "SELECT * FROM orders")
    assert many["row_count"] == MAX_ROWS
    assert many["truncated"] is True


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM orders",
        "UPDATE orders SET amount = 0",
        "INSERT INTO orders VALUES (1, 'x', 1, 'y')",
        "DROP TABLE orders",
        "CREATE TABLE t (x)",
        "SELECT 1; DELETE FROM orders",
        "ATTACH DATABASE '/tmp/evil.sqlite' AS evil",
        "PRAGMA journal_mode = DELETE",
        "PRAGMA writable_schema = ON",
        "SELECT load_extension('/tmp/evil')",
        "VACUUM",
        "SELECT zeroblob(500000000)",
        "SELECT length(randomblob(400000000))",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    ],
)
def test_writes_and_escapes_are_refused(db: Path, sql: str) -> None:
    with pytest.raises(ValueError, match="refused or failed"):
        run_query(db, sql)
    assert run_query(db, "SELECT count(*) FROM orders")["rows"] == [[200]]


def test_tools(db: Path) -> None:
    query, describe = sql_tools(db)
    assert query.invoke({"sql": "SELECT count(*) FROM orders"})["rows"] == [[200]]
    assert "amount REAL" in describe.invoke({})["tables"]["orders"]
    with pytest.raises(ValueError, match="database file"):
        sql_tools(None)
