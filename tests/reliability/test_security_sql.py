"""Hostile SQL against the read-only query tool, beyond tests/tools/test_sql.py: every write,
escape and resource trick is refused with one line, the database file stays byte-for-byte the
same, no file appears next to it, and giant results stay small."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from gated_react import Policy, build_graph
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.sql import MAX_ROWS, run_query, sql_tools

from ..support.results import invoked


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount REAL, note TEXT)")
        conn.execute("CREATE INDEX by_amount ON orders (amount)")
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?)", [(i, i * 1.5, "n") for i in range(1, 201)]
        )
    conn.close()
    return path


def fingerprint(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


HOSTILE = [
    "REPLACE INTO orders VALUES (1, 0, 'x')",
    "INSERT OR IGNORE INTO orders VALUES (999, 0, 'x')",
    "WITH x AS (SELECT 1) DELETE FROM orders",
    "/* comment */ DELETE FROM orders",
    "sElEcT 1; DeLeTe FrOm orders",
    "SELECT 1; ATTACH 'x.sqlite' AS x",
    "UPDATE sqlite_master SET sql = ''",
    "CREATE TEMP TABLE t (x)",
    "CREATE TEMP VIEW v AS SELECT 1",
    "CREATE TRIGGER t AFTER INSERT ON orders BEGIN SELECT 1; END",
    "DROP INDEX by_amount",
    "REINDEX",
    "ANALYZE",
    "BEGIN IMMEDIATE",
    "SAVEPOINT s",
    "DETACH main",
    "ATTACH ':memory:' AS m",
    "ATTACH 'file:{dir}/evil.sqlite?mode=rwc' AS evil",
    "VACUUM INTO '{dir}/copy.sqlite'",
    "PRAGMA query_only = OFF",
    "PRAGMA journal_mode = WAL",
    "PRAGMA user_version = 7",
    "PRAGMA table_info(orders)",
    "SELECT * FROM pragma_database_list",
    "SELECT * FROM pragma_table_info('orders')",
    "SELECT load_extension('{dir}/evil.so')",
    "SELECT LOAD_EXTENSION('libevil')",
    "SELECT fts3_tokenizer('simple')",
    "SELECT readfile('/etc/passwd')",
    "SELECT writefile('{dir}/out.txt', 'x')",
    "SELECT zeroblob(500000000)",
    "SELECT randomblob(2000000)",
    "SELECT group_concat(a.note || b.note || c.note) FROM orders a, orders b, orders c",
    "SELECT char(55296)",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_statements_are_refused_and_change_nothing(db: Path, sql: str) -> None:
    before = fingerprint(db.parent)
    with pytest.raises(ValueError, match="refused or failed") as err:
        run_query(db, sql.format(dir=db.parent))
    assert "\n" not in str(err.value)
    assert fingerprint(db.parent) == before  # no change, and no new file (copies, attachments)


def test_giant_result_sets_are_capped(db: Path) -> None:
    rows = run_query(db, "SELECT a.id, b.id, c.id FROM orders a, orders b, orders c")
    assert rows["row_count"] == MAX_ROWS
    assert rows["truncated"] is True
    wide = run_query(db, "SELECT hex(zeroblob(400000)) AS h, * FROM orders")  # 800 KB a row
    assert wide["row_count"] == MAX_ROWS
    count = run_query(db, "SELECT count(*) FROM orders a, orders b, orders c")
    assert count["rows"] == [[8_000_000]]  # reads are fine, however many rows they touch


def test_a_run_of_hostile_queries_leaves_the_file_unchanged(db: Path) -> None:
    before = fingerprint(db.parent)
    script = [call("query_database", sql=sql.format(dir=db.parent)) for sql in HOSTILE[:12]]
    script += [call("query_database", sql="SELECT count(*) FROM orders"), "200 orders."]
    graph = build_graph(
        ScriptedChatModel(replies=script),
        sql_tools(db),
        policy=Policy(on_tool_error="observe", loop_detection="off"),
    )
    out = invoked(graph, {"goal": "Break the database."})
    assert out["stop_reason"] == "max_tool_calls"  # 6 calls, all refused by the tool
    assert all(t["error"] == "tool_error:query_database" for t in out["trace"][:6])
    assert fingerprint(db.parent) == before
