from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from gated_react.tools import sql
from gated_react.tools.sql import (
    MAX_ROWS,
    MAX_SECONDS,
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
        conn.execute("CREATE TABLE orders (id INTEGER, product TEXT, amount REAL, status TEXT)")
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?)",
            [(i, f"p{i}", float(i), "completed" if i % 2 else "pending") for i in range(1, 201)],
        )
    conn.close()
    return path


@pytest.fixture
def wal_db(db: Path) -> Path:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()  # the last connection checkpoints and removes -wal and -shm
    assert sorted(os.listdir(db.parent)) == ["shop.sqlite"]
    return db


def test_select_and_row_cap(db: Path) -> None:
    total = run_query(db, "SELECT SUM(amount) AS total FROM orders WHERE status = 'completed'")
    assert total == {"columns": ["total"], "rows": [[10000.0]], "row_count": 1, "truncated": False}
    many = run_query(db, "SELECT * FROM orders")
    assert many["row_count"] == MAX_ROWS
    assert many["truncated"] is True


@pytest.mark.parametrize(
    ("limit", "count", "truncated"),
    [
        (MAX_ROWS - 1, MAX_ROWS - 1, False),
        (MAX_ROWS, MAX_ROWS, False),
        (MAX_ROWS + 1, MAX_ROWS, True),
    ],
)
def test_the_row_cap_is_exact(db: Path, limit: int, count: int, truncated: bool) -> None:
    found = run_query(db, f"SELECT id FROM orders ORDER BY id LIMIT {limit}")
    assert found["rows"] == [[i] for i in range(1, count + 1)]
    assert (found["row_count"], found["truncated"]) == (count, truncated)


def test_a_bounded_recursive_query_is_allowed(db: Path) -> None:
    sql_text = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 10) "
    assert run_query(db, sql_text + "SELECT sum(x) FROM c")["rows"] == [[55]]


RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


@pytest.mark.parametrize(
    "sql_text",
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
        RUNAWAY,
    ],
)
def test_writes_and_escapes_are_refused(
    db: Path, sql_text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if sql_text == RUNAWAY:  # only the time limit ends it: a short one, the 5 s are tested below
        monkeypatch.setattr(sql, "MAX_SECONDS", 1.0)
    with pytest.raises(QueryError, match="refused or failed"):
        run_query(db, sql_text)
    assert run_query(db, "SELECT count(*) FROM orders")["rows"] == [[200]]


@pytest.mark.parametrize(
    ("name", "problem"), [("missing.sqlite", "does not exist"), (".", "is not a file")]
)
def test_a_missing_database_is_refused_and_not_created(
    tmp_path: Path, name: str, problem: str
) -> None:
    with pytest.raises(MissingDatabase, match=problem):
        run_query(tmp_path / name, "SELECT 1")
    assert os.listdir(tmp_path) == []


def test_a_wal_database_is_read_without_creating_a_file(wal_db: Path) -> None:
    assert run_query(wal_db, "SELECT count(*) FROM orders")["rows"] == [[200]]
    assert sorted(os.listdir(wal_db.parent)) == ["shop.sqlite"]


def test_commits_still_in_a_writers_log_are_read_and_its_files_left_alone(wal_db: Path) -> None:
    writer = sqlite3.connect(wal_db)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")  # the new row stays in the -wal file
        writer.execute("INSERT INTO orders VALUES (201, 'p201', 201.0, 'completed')")
        writer.commit()
        before = sorted(os.listdir(wal_db.parent))
        assert before == ["shop.sqlite", "shop.sqlite-shm", "shop.sqlite-wal"]
        assert run_query(wal_db, "SELECT max(id) FROM orders")["rows"] == [[201]]
        assert sorted(os.listdir(wal_db.parent)) == before
    finally:
        writer.close()


def test_a_log_without_its_shm_file_is_refused_and_nothing_created(wal_db: Path) -> None:
    writer = sqlite3.connect(wal_db)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("INSERT INTO orders VALUES (201, 'p201', 201.0, 'completed')")
    writer.commit()
    (wal_db.parent / "shop.sqlite-shm").unlink()  # as a writer that crashed may leave it
    try:
        with pytest.raises(QueryError, match=r"shop\.sqlite-wal was left by a writer"):
            run_query(wal_db, "SELECT count(*) FROM orders")
        assert sorted(os.listdir(wal_db.parent)) == ["shop.sqlite", "shop.sqlite-wal"]
    finally:
        writer.close()


# instr() of two strings near the 1 MB value cap is one SQLite step of seconds: the progress
# handler never runs inside it. Twenty of them would take minutes.
SLOW_STEP = (
    "WITH s(h, n) AS (SELECT replace(hex(zeroblob(499999)), '0', 'a'), "
    "replace(hex(zeroblob(250000)), '0', 'a') || 'b') SELECT "
    + " + ".join(["instr(h, n)"] * 20)
    + " FROM s"
)


def _workers_alive() -> list[int]:
    """This process's worker children that are still running (Linux /proc)."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if f"\nPPid:\t{os.getpid()}\n" in status and b"_sql_worker" in cmdline:
            alive.append(int(pid))
    return alive


@pytest.mark.parametrize(("mode", "limit"), [("invoke", MAX_SECONDS), ("ainvoke", 1.0)])
def test_one_long_step_is_stopped_at_the_time_limit(
    db: Path, mode: str, limit: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the documented limit, and at a shorter one (each second of it is a second of CPU)."""
    monkeypatch.setattr(sql, "MAX_SECONDS", limit)
    query = sql_tools(db)[0]
    box: list[Any] = []

    def call() -> None:
        try:
            if mode == "invoke":
                query.invoke({"sql": SLOW_STEP})
            else:
                asyncio.run(query.ainvoke({"sql": SLOW_STEP}))
        except QueryError as exc:
            box.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(30)  # a guard against the old behaviour (minutes), not a timing assertion
    assert not thread.is_alive()
    assert f"stopped at the time limit of {limit:g} s" in str(box[0])
    assert _workers_alive() == []  # killed and reaped, not left running


def test_tools(db: Path) -> None:
    query, describe = sql_tools(db)
    assert query.invoke({"sql": "SELECT count(*) FROM orders"})["rows"] == [[200]]
    assert asyncio.run(query.ainvoke({"sql": "SELECT count(*) FROM orders"}))["rows"] == [[200]]
    assert "amount REAL" in describe.invoke({})["tables"]["orders"]
    with pytest.raises(ValueError, match="database file"):
        sql_tools(None)


def test_a_worker_that_dies_is_one_error_line(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nsys.exit('worker broke\\nhere')\n")
    monkeypatch.setattr(sql, "WORKER", broken)
    with pytest.raises(QueryError, match=r"without a result \(exit code 1: here\)$"):
        run_query(db, "SELECT 1")


# Its parts one at a time, each message word for word (what `make mutation` found untested).
# The SQL tool's side of the worker, beside the runs above: the request it sends, every way a worker
# can fail to answer, and each message word for word.


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, amount REAL)")
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.executemany("INSERT INTO orders VALUES (?, ?)", [(i, i * 2.0) for i in range(1, 9)])
    conn.close()
    return path


def test_the_row_cap_is_the_callers(small_db: Path) -> None:
    found = run_query(small_db, "SELECT id FROM orders ORDER BY id", max_rows=3)
    assert found == {"columns": ["id"], "rows": [[1], [2], [3]], "row_count": 3, "truncated": True}


def test_a_relative_database_path_is_read(small_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(small_db.parent)
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


def test_a_refused_query_says_why_in_one_line(small_db: Path) -> None:
    with pytest.raises(QueryError) as err:
        run_query(small_db, "DELETE FROM orders")
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
    small_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, tail: str
) -> None:
    _worker_that(tmp_path, monkeypatch, body)
    with pytest.raises(QueryError) as err:
        run_query(small_db, "SELECT 1")
    assert str(err.value) == (
        f"query refused or failed: the query process ended without a result ({tail})"
    )


def test_the_worker_gets_the_request_it_needs(
    small_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    link.symlink_to(small_db)
    assert run_query(link, "SELECT 2", max_rows=7) == [  # type: ignore[comparison-overlap]
        [str(small_db.resolve()), "SELECT 2", 7, 5.0],
        [1, 1],
    ]


def test_an_error_answer_is_passed_on(
    small_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _worker_that(
        tmp_path,
        monkeypatch,
        "import marshal, sys\nsys.stdout.buffer.write(marshal.dumps(('no', 'told so')))\n",
    )
    with pytest.raises(QueryError) as err:
        run_query(small_db, "SELECT 1")
    assert str(err.value) == "query refused or failed: told so"


def test_a_worker_that_cannot_start_is_one_line(
    small_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "no-python"
    monkeypatch.setattr(sys, "executable", str(missing))
    with pytest.raises(QueryError) as err:
        run_query(small_db, "SELECT 1")
    assert str(err.value) == (
        "query refused or failed: cannot start the query process: "
        f"[Errno 2] No such file or directory: {str(missing)!r}"
    )


def test_describe_lists_every_table_with_its_create_statement(small_db: Path) -> None:
    query, describe = sql_tools(small_db)
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
