"""The worker's read-only layers one at a time (each test fails if its layer is removed), and the
shared lock that keeps a WAL database's file as it was while it is read without SQLite's locks."""

from __future__ import annotations

import json
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
from gated_react.tools._sql_worker import (
    MAX_VALUE_BYTES,
    Refused,
    Session,
    authorize,
    lock_shared,
    open_params,
    query,
)
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


# Its parts one at a time, each message word for word (what `make mutation` found untested).
# The SQL worker's functions called in this process: what the tests through a worker process
# (test_sql.py) check, pinned here where a changed line shows, plus the exact lock SQLite's
# readers take, the open parameters and ``main``'s request and reply.


PENDING = 0x40000000
SHARED_FIRST = PENDING + 2


@pytest.fixture(params=["DELETE", "WAL"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA journal_mode = {request.param}")
        conn.execute("CREATE TABLE orders (id INTEGER, product TEXT, amount REAL)")
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?)", [(i, f"p{i}", i * 1.5) for i in range(1, 61)]
        )
    conn.close()
    return path


@pytest.mark.parametrize(
    ("action", "allowed"),
    [
        (sqlite3.SQLITE_SELECT, True),
        (sqlite3.SQLITE_READ, True),
        (sqlite3.SQLITE_FUNCTION, True),
        (sqlite3.SQLITE_RECURSIVE, True),
        (sqlite3.SQLITE_INSERT, False),
        (sqlite3.SQLITE_ATTACH, False),
        (sqlite3.SQLITE_PRAGMA, False),
        (sqlite3.SQLITE_TRANSACTION, False),
    ],
)
def test_the_authorizer_allows_exactly_the_read_actions(action: int, allowed: bool) -> None:
    expected = sqlite3.SQLITE_OK if allowed else sqlite3.SQLITE_DENY
    assert authorize(action, None, "abs", None, None) == expected
    assert authorize(action, None, None, None, None) == expected


@pytest.mark.parametrize(
    "name", ["load_extension", "LOAD_EXTENSION", "readfile", "writefile", "edit", "fts3_tokenizer"]
)
def test_the_authorizer_denies_the_file_functions_in_any_case(name: str) -> None:
    assert authorize(sqlite3.SQLITE_FUNCTION, None, name) == sqlite3.SQLITE_DENY
    assert authorize(sqlite3.SQLITE_READ, None, name) == sqlite3.SQLITE_OK  # a column so named


def test_rows_columns_and_the_exact_row_cap(db: Path) -> None:
    found = query(str(db), "SELECT id, product AS name FROM orders ORDER BY id", 3)
    assert found == {
        "columns": ["id", "name"],
        "rows": [[1, "p1"], [2, "p2"], [3, "p3"]],
        "row_count": 3,
        "truncated": True,
    }
    assert query(str(db), "SELECT id FROM orders WHERE id <= 3", 3)["truncated"] is False
    assert query(str(db), "SELECT id FROM orders")["row_count"] == 50  # MAX_ROWS by default


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("DELETE FROM orders", "not authorized"),
        ("SELECT load_extension('x')", "not authorized"),
        ("SELECT 1; SELECT 2", "one statement at a time"),
    ],
)
def test_writes_and_file_functions_are_refused(db: Path, sql: str, why: str) -> None:
    with pytest.raises(sqlite3.Error, match=why):
        query(str(db), sql)
    assert query(str(db), "SELECT count(*) FROM orders")["rows"] == [[60]]


def test_no_value_may_exceed_the_value_cap(db: Path) -> None:
    edge = query(str(db), f"SELECT length(zeroblob({MAX_VALUE_BYTES}))")
    assert edge["rows"] == [[MAX_VALUE_BYTES]]
    with pytest.raises(sqlite3.DataError, match="too big"):
        query(str(db), f"SELECT zeroblob({MAX_VALUE_BYTES + 1})")


@pytest.mark.parametrize(
    ("value", "size"), [("ab", 2), ("é", 2), (b"abc", 3), (7, 8), (1.5, 8), (None, 8)]
)
def test_values_are_sized_in_bytes(value: object, size: int) -> None:
    assert _sql_worker._size(value) == size


def test_the_byte_budget_is_a_limit_that_may_be_reached(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sql_worker, "MAX_RESULT_BYTES", 2 * 3)  # two rows of 'abc'
    found = query(str(db), "SELECT 'abc' FROM orders LIMIT 3", 10)
    assert (found["rows"], found["truncated"]) == ([["abc"], ["abc"]], True)


def _locks_free(database: Path, ranges: list[tuple[int, int]]) -> list[bool]:
    """For each (length, start), whether another process may lock it exclusively."""
    code = (
        "import fcntl, json, sys\n"
        "fd = open(sys.argv[1], 'rb+')\n"
        "free = []\n"
        "for length, start in json.loads(sys.argv[2]):\n"
        "    try:\n"
        "        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, start)\n"
        "        fcntl.lockf(fd, fcntl.LOCK_UN, length, start)\n"
        "        free.append(True)\n"
        "    except OSError:\n"
        "        free.append(False)\n"
        "print(json.dumps(free))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(database), json.dumps(ranges)],
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(done.stdout))


def test_a_session_holds_exactly_sqlites_shared_lock(tmp_path: Path) -> None:
    """On a WAL database read as immutable, where the lock is what keeps the file as it is.
    (On a rollback database SQLite's own unlock after each read drops the range: there its
    own locking holds the snapshot.)"""
    db = _wal_with(tmp_path, wal=None, shm=False)
    session = Session(str(db))
    assert session.params == "mode=ro&immutable=1"
    try:
        held = _locks_free(
            db,
            [
                (1, PENDING),  # released once the shared range is held
                (1, PENDING + 1),  # the RESERVED byte: never taken by a reader
                (1, SHARED_FIRST - 1),
                (1, SHARED_FIRST),
                (1, SHARED_FIRST + 509),
                (1, SHARED_FIRST + 510),
            ],
        )
    finally:
        session.close()
    assert held == [True, True, True, False, False, True]
    assert _locks_free(db, [(510, SHARED_FIRST)]) == [True]  # closed: every lock dropped


def test_a_lock_error_other_than_busy_is_refused_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken(*_: Any) -> None:
        raise OSError(9, "Bad file descriptor")

    monkeypatch.setattr(_sql_worker.fcntl, "lockf", broken)
    with pytest.raises(Refused, match=r"^cannot lock the database: Bad file descriptor$"):
        lock_shared(0, 60.0)


def test_a_busy_lock_is_retried_until_it_frees(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, ...]] = []

    def busy_twice(_fd: int, cmd: int, length: int = 0, start: int = 0) -> None:
        calls.append((cmd, length, start))
        if len(calls) <= 2:
            raise OSError(11, "Resource temporarily unavailable")

    naps: list[float] = []
    monkeypatch.setattr(_sql_worker.fcntl, "lockf", busy_twice)
    monkeypatch.setattr(_sql_worker.time, "sleep", naps.append)
    lock_shared(0, 60.0)
    assert naps == [0.01, 0.01]  # polled, not slept on for a second
    shared = _sql_worker.fcntl.LOCK_SH | _sql_worker.fcntl.LOCK_NB
    assert calls[2:] == [
        (shared, 1, PENDING),
        (shared, 510, SHARED_FIRST),
        (_sql_worker.fcntl.LOCK_UN, 1, PENDING),
    ]


def _wal_with(tmp_path: Path, *, wal: bytes | None, shm: bool) -> Path:
    database = tmp_path / "w.sqlite"
    with sqlite3.connect(database) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    if wal is not None:
        (tmp_path / "w.sqlite-wal").write_bytes(wal)
    if shm:
        (tmp_path / "w.sqlite-shm").write_bytes(b"")
    return database


@pytest.mark.parametrize(
    ("wal", "shm", "params"),
    [
        (None, False, "mode=ro&immutable=1"),
        (b"", False, "mode=ro&immutable=1"),
        (b"", True, "mode=ro&immutable=1"),
        (b"x", True, "mode=ro"),
    ],
)
def test_the_open_parameters_of_a_wal_database(
    tmp_path: Path, wal: bytes | None, shm: bool, params: str
) -> None:
    database = _wal_with(tmp_path, wal=wal, shm=shm)
    with open(database, "rb") as file:
        assert open_params(str(database), file.fileno()) == params


def test_a_wal_log_without_its_shm_is_refused_by_name(tmp_path: Path) -> None:
    database = _wal_with(tmp_path, wal=b"x", shm=False)
    with (
        open(database, "rb") as file,
        pytest.raises(Refused) as err,
    ):
        open_params(str(database), file.fileno())
    assert str(err.value) == (
        "w.sqlite-wal was left by a writer that did not close; open the database once with a "
        "writer to recover it"
    )


def test_a_rollback_database_is_opened_read_only_even_with_a_stray_log(tmp_path: Path) -> None:
    database = tmp_path / "r.sqlite"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    (tmp_path / "r.sqlite-wal").write_bytes(b"x")  # no shm: refused in WAL mode, not here
    with open(database, "rb") as file:
        assert open_params(str(database), file.fileno()) == "mode=ro"


def test_only_an_immutable_read_is_checked_for_changes(tmp_path: Path) -> None:
    database = tmp_path / "r.sqlite"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    session = Session(str(database))
    try:
        assert session.params == "mode=ro"
        with open(database, "ab") as file:  # SQLite's own locks cover this mode
            file.write(b"\0" * 512)
        session.check_unchanged()
        session.params = "mode=ro&immutable=1"
        with pytest.raises(Refused, match=r"^the database changed while it was read; run"):
            session.check_unchanged()
    finally:
        session.close()


def test_a_lock_that_stays_busy_is_refused_after_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    def busy(*_: Any) -> None:
        raise OSError(13, "Permission denied")  # EACCES: how some systems say busy

    monkeypatch.setattr(_sql_worker.fcntl, "lockf", busy)
    with pytest.raises(Refused) as err:
        lock_shared(0, 0.0)
    assert str(err.value) == "database is locked"


def test_sqlite_waits_for_its_own_locks_as_long_as_for_ours(db: Path) -> None:
    session = Session(str(db))
    try:
        session.conn.set_authorizer(None)  # only to read the setting
        assert session.conn.execute("PRAGMA busy_timeout").fetchone() == (2000,)
    finally:
        session.close()


def test_commits_in_a_live_writers_log_are_read(tmp_path: Path) -> None:
    database = tmp_path / "w.sqlite"
    writer = sqlite3.connect(database)
    try:
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("CREATE TABLE t (x)")
        writer.execute("INSERT INTO t VALUES (1)")
        writer.commit()
        session = Session(str(database))
        try:
            assert session.params == "mode=ro"
            assert session.conn.execute("SELECT x FROM t").fetchall() == [(1,)]
        finally:
            session.close()
    finally:
        writer.close()
