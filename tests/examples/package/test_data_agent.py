"""002 data agent as shipped: the SQLite file is what orders_db builds, and the SQL tool is
read-only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gated_react import examples
from gated_react.examples import data_agent, orders_db
from gated_react.examples.spec import package_files

EXAMPLE = examples.get("002-data")
SHIPPED = Path(str(package_files() / data_agent.DATABASE))


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
