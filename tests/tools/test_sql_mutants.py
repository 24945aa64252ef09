"""The SQL tool's side of the worker, beside test_sql.py: the request it sends, every way a worker
can fail to answer, and each message word for word."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from gated_react.tools import sql
from gated_react.tools.sql import (
    DescribeDatabase,
    MissingDatabase,
    QueryDatabase,
    QueryError,
    run_query,
    sql_tools,
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, amount REAL)")
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.executemany("INSERT INTO orders VALUES (?, ?)", [(i, i * 2.0) for i in range(1, 9)])
    conn.close()
    return path


def test_the_row_cap_is_the_callers(db: Path) -> None:
    found = run_query(db, "SELECT id FROM orders ORDER BY id", max_rows=3)
    assert found == {"columns": ["id"], "rows": [[1], [2], [3]], "row_count": 3, "truncated": True}


def test_a_relative_database_path_is_read(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(db.parent)
    assert run_query(Path("shop.sqlite"), "SELECT count(*) FROM orders")["rows"] == [[8]]


@pytest.mark.parametrize(("name", "problem"), [("gone.sqlite", "does not exist"), ("", "is not")])
def test_a_missing_database_is_named_in_the_message(
    tmp_path: Path, name: str, problem: str
) -> None:
    path = tmp_path / name
    expected = f"database file {path} {problem}" + (" a file" if problem == "is not" else "")
    with pytest.raises(MissingDatabase) as err:
        run_query(path, "SELECT 1")
    assert str(err.value) == expected


def test_a_refused_query_says_why_in_one_line(db: Path) -> None:
    with pytest.raises(QueryError) as err:
        run_query(db, "DELETE FROM orders")
    assert str(err.value) == "query refused or failed: not authorized"


def _worker_that(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    worker = tmp_path / "worker.py"
    worker.write_text(body)
    monkeypatch.setattr(sql, "WORKER", worker)


@pytest.mark.parametrize(
    ("body", "tail"),
    [
        ("import sys\nsys.exit(3)\n", "exit code 3: no output"),
        ("import sys\nsys.stdout.write('not marshal')\n", "exit code 0: no output"),
        ("import sys\nsys.exit('x' * 300)\n", f"exit code 1: {'x' * 200}"),
        ("import sys\nsys.exit('first\\nlast line\\n\\n')\n", "exit code 1: last line"),
        ("import os\nos.write(2, b'bad \\xff')\nos._exit(2)\n", "exit code 2: bad \ufffd"),
    ],
)
def test_a_worker_without_an_answer_is_one_line(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, tail: str
) -> None:
    _worker_that(tmp_path, monkeypatch, body)
    with pytest.raises(QueryError) as err:
        run_query(db, "SELECT 1")
    assert str(err.value) == (
        f"query refused or failed: the query process ended without a result ({tail})"
    )


def test_the_worker_gets_the_request_it_needs(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker starts isolated (-I -S: no site, no environment) and is told the database's
    real path, the SQL, the row cap and the time limit."""
    _worker_that(
        tmp_path,
        monkeypatch,
        "import marshal, sys\n"
        "request = marshal.load(sys.stdin.buffer)\n"
        "flags = [sys.flags.isolated, sys.flags.no_site]\n"
        "sys.stdout.buffer.write(marshal.dumps(('ok', [list(request), flags])))\n",
    )
    link = tmp_path / "link.sqlite"
    link.symlink_to(db)
    assert run_query(link, "SELECT 2", max_rows=7) == [  # type: ignore[comparison-overlap]
        [str(db.resolve()), "SELECT 2", 7, 5.0],
        [1, 1],
    ]


def test_an_error_answer_is_passed_on(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _worker_that(
        tmp_path,
        monkeypatch,
        "import marshal, sys\nsys.stdout.buffer.write(marshal.dumps(('no', 'told so')))\n",
    )
    with pytest.raises(QueryError) as err:
        run_query(db, "SELECT 1")
    assert str(err.value) == "query refused or failed: told so"


def test_a_worker_that_cannot_start_is_one_line(
    db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "no-python"
    monkeypatch.setattr(sys, "executable", str(missing))
    with pytest.raises(QueryError) as err:
        run_query(db, "SELECT 1")
    assert str(err.value) == (
        "query refused or failed: cannot start the query process: "
        f"[Errno 2] No such file or directory: {str(missing)!r}"
    )


def test_describe_lists_every_table_with_its_create_statement(db: Path) -> None:
    query, describe = sql_tools(db)
    assert [type(query), type(describe)] == [QueryDatabase, DescribeDatabase]
    assert describe.invoke({}) == {
        "tables": {
            "orders": "CREATE TABLE orders (id INTEGER, amount REAL)",
            "users": "CREATE TABLE users (name TEXT)",
        }
    }
    assert query.invoke({"sql": "SELECT max(amount) FROM orders"})["rows"] == [[16.0]]


def test_the_toolkit_needs_a_database() -> None:
    with pytest.raises(ValueError, match="needs a database") as err:
        sql_tools(None)
    assert str(err.value) == "the sql toolkit needs a database file (--database PATH)"
