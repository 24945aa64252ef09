"""The SQL worker's ``main`` called in this process: the request it reads, the alarm and the
memory limit it sets on itself, and the reply it writes for rows and for each kind of failure.
(test_sql_worker.py starts the real worker; mutmut cannot see inside that process.)"""

from __future__ import annotations

import io
import marshal
import sqlite3
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gated_react.tools import _sql_worker
from gated_react.tools._sql_worker import MEMORY_BYTES


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER)")
        conn.executemany("INSERT INTO orders VALUES (?)", [(i,) for i in range(1, 6)])
    conn.close()
    return path


class _Process:
    """What ``main`` touches outside its query: stdin, stdout, the alarm and the memory limit."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, request: tuple[Any, ...], hard: int):
        self.calls: list[tuple[Any, ...]] = []
        self.stdout = SimpleNamespace(buffer=io.BytesIO())
        stdin = SimpleNamespace(buffer=io.BytesIO(marshal.dumps(request)))
        monkeypatch.setattr(sys, "stdin", stdin)
        monkeypatch.setattr(sys, "stdout", self.stdout)
        record = self.calls.append
        fake_signal = SimpleNamespace(
            SIGALRM=14,
            SIG_DFL=0,
            ITIMER_REAL=0,
            signal=lambda *args: record(("signal", *args)),
            setitimer=lambda *args: record(("setitimer", *args)),
        )
        fake_resource = SimpleNamespace(
            RLIMIT_AS=9,
            RLIM_INFINITY=-1,
            getrlimit=lambda which: (-1, hard) if which == 9 else (0, 0),
            setrlimit=lambda *args: record(("setrlimit", *args)),
        )
        monkeypatch.setattr(_sql_worker, "signal", fake_signal)
        monkeypatch.setattr(_sql_worker, "resource", fake_resource)

    def reply(self) -> Any:
        return marshal.loads(self.stdout.buffer.getvalue())


@pytest.mark.parametrize(
    ("hard", "limit"), [(-1, MEMORY_BYTES), (MEMORY_BYTES * 2, MEMORY_BYTES), (5000, 5000)]
)
def test_main_answers_one_request_within_its_alarm_and_memory_limit(
    db: Path, monkeypatch: pytest.MonkeyPatch, hard: int, limit: int
) -> None:
    process = _Process(monkeypatch, (str(db), "SELECT id FROM orders ORDER BY id", 2, 3.5), hard)
    _sql_worker.main()
    assert process.reply() == (
        "ok",
        {"columns": ["id"], "rows": [[1], [2]], "row_count": 2, "truncated": True},
    )
    assert process.calls == [
        ("signal", 14, 0),
        ("setitimer", 0, 4.5),
        ("setrlimit", 9, (limit, hard)),
    ]


def test_main_replies_with_the_error_on_one_line(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    process = _Process(monkeypatch, (str(db), "SELECT\n  nope\n FROM orders", 2, 3.0), -1)
    _sql_worker.main()
    assert process.reply() == ("error", "no such column: nope")


def test_main_names_an_error_without_a_message(
    db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def silent(*_: Any) -> Any:
        raise OSError

    monkeypatch.setattr(_sql_worker, "query", silent)
    process = _Process(monkeypatch, (str(db), "SELECT 1", 2, 3.0), -1)
    _sql_worker.main()
    assert process.reply() == ("error", "OSError")


def test_main_reports_running_out_of_memory(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def hungry(*_: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(_sql_worker, "query", hungry)
    process = _Process(monkeypatch, (str(db), "SELECT 1", 2, 3.0), -1)
    _sql_worker.main()
    assert process.reply() == ("error", "out of memory: a query may use 1024 MB")
