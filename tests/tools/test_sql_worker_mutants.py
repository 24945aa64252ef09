"""The SQL worker's functions called in this process, beside test_sql_worker.py: what the tests
through a worker process (test_sql.py) check, pinned here where a changed line shows, plus the
exact lock SQLite's readers take, the open parameters and ``main``'s request and reply."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
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
