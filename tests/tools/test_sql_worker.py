"""The worker's read-only layers one at a time (each test fails if its layer is removed), and the
shared lock that keeps a WAL database's file as it was while it is read without SQLite's locks."""

from __future__ import annotations

import marshal
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gated_react.tools import _sql_worker
from gated_react.tools._sql_worker import Refused, Session
from gated_react.tools.sql import WORKER

from ..support.reaping import PATIENCE


def _create(path: Path, journal_mode: str) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA journal_mode = {journal_mode}")
        conn.execute("CREATE TABLE orders (id INTEGER, amount REAL)")
        conn.executemany("INSERT INTO orders VALUES (?, ?)", [(i, i * 1.5) for i in range(1, 11)])
    conn.close()
    return path


@pytest.fixture(params=["DELETE", "WAL"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Session]:
    opened = Session(str(_create(tmp_path / "shop.sqlite", request.param)))
    yield opened
    opened.close()


@pytest.fixture
def wal_db(tmp_path: Path) -> Path:
    return _create(tmp_path / "shop.sqlite", "WAL")


def test_the_read_only_open_alone_refuses_writes(session: Session) -> None:
    session.conn.set_authorizer(None)
    session.conn.execute("PRAGMA query_only = OFF")
    with pytest.raises(sqlite3.OperationalError, match="readonly database"):
        session.conn.execute("INSERT INTO orders VALUES (11, 0)")


def test_query_only_alone_refuses_writes_even_to_the_temp_database(session: Session) -> None:
    session.conn.set_authorizer(None)  # a read-only open still lets temp tables be written
    with pytest.raises(sqlite3.OperationalError, match="readonly database"):
        session.conn.execute("CREATE TEMP TABLE t (x)")


@pytest.mark.parametrize(
    "sql",
    [
        "ATTACH ':memory:' AS m",
        "PRAGMA query_only = OFF",
        "SELECT * FROM pragma_table_info('orders')",
    ],
)
def test_the_authorizer_alone_refuses_what_the_other_layers_allow(
    session: Session, sql: str
) -> None:
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        session.conn.execute(sql)


def test_a_wal_database_without_a_log_is_read_as_immutable(wal_db: Path) -> None:
    opened = Session(str(wal_db))
    try:
        assert opened.params == "mode=ro&immutable=1"
        assert opened.conn.execute("SELECT count(*) FROM orders").fetchone() == (10,)
    finally:
        opened.close()
    assert sorted(os.listdir(wal_db.parent)) == ["shop.sqlite"]


def _write(database: Path, *statements: str) -> None:
    """Insert a row from another process (its locks are real to ours), commit, close."""
    code = (
        "import sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "for statement in sys.argv[2:]:\n"
        "    conn.execute(statement)\n"
        "conn.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(database), *statements], check=True)


def test_the_lock_keeps_a_closing_writer_from_rewriting_the_file(wal_db: Path) -> None:
    opened = Session(str(wal_db))
    try:
        _write(wal_db, "INSERT INTO orders VALUES (11, 0)")
        # Its checkpoint at close needs an EXCLUSIVE lock: the commit stays in its log.
        assert (wal_db.parent / "shop.sqlite-wal").stat().st_size > 0
        assert opened.conn.execute("SELECT count(*) FROM orders").fetchone() == (10,)
        opened.check_unchanged()
    finally:
        opened.close()


def test_rows_read_while_the_file_was_rewritten_are_refused(
    wal_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetch = _sql_worker._fetch

    def fetch_after_a_checkpoint(cursor: sqlite3.Cursor, max_rows: int) -> Any:
        # A writer that checkpoints by hand needs no lock on the file: nothing stops it.
        _write(wal_db, "INSERT INTO orders VALUES (11, 0)", "PRAGMA wal_checkpoint")
        return fetch(cursor, max_rows)

    monkeypatch.setattr(_sql_worker, "_fetch", fetch_after_a_checkpoint)
    with pytest.raises(Refused, match="changed while it was read"):
        _sql_worker.query(str(wal_db), "SELECT count(*) FROM orders")


def test_the_rows_are_cut_at_the_byte_budget(wal_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sql_worker, "MAX_RESULT_BYTES", 3 * 8 + 2)  # three rows of one integer
    found = _sql_worker.query(str(wal_db), "SELECT id FROM orders ORDER BY id")
    assert (found["rows"], found["truncated"]) == ([[1], [2], [3]], True)


def _worker(request: tuple[Any, ...]) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-I", "-S", str(WORKER)]
    return subprocess.run(
        command, input=marshal.dumps(request), capture_output=True, timeout=PATIENCE, check=False
    )


def test_a_worker_left_alone_kills_itself_a_second_after_its_time(wal_db: Path) -> None:
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"
    done = _worker((str(wal_db), endless, 50, 0.2))  # no caller kills it
    assert done.returncode == -signal.SIGALRM


def test_a_query_that_needs_more_memory_than_allowed_is_refused(wal_db: Path) -> None:
    wide = "WITH s(h) AS (SELECT hex(zeroblob(499999))) SELECT " + ",".join(["h"] * 1200)
    status, message = marshal.loads(_worker((str(wal_db), wide + " FROM s", 50, 30.0)).stdout)
    assert (status, message) == ("error", "out of memory: a query may use 1024 MB")


def test_a_database_locked_by_a_writer_is_refused_after_the_wait(tmp_path: Path) -> None:
    database = _create(tmp_path / "shop.sqlite", "DELETE")
    code = (
        "import sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code, str(database)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as writer:
        assert writer.stdout is not None
        assert writer.stdin is not None
        assert writer.stdout.readline() == "locked\n"
        with pytest.raises(Refused, match="database is locked"):
            Session(str(database), wait=0.2)
        writer.stdin.close()
    Session(str(database)).close()  # free again once the writer is gone
