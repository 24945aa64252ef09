"""A valid SQLite file whose checkpoint rows hold garbage: every command that reads them says so in
one line naming the thread and exits 1, never a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ..support.cli import invoke
from ..support.openai_server import FakeOpenAI, tool_call

JUNK = bytes(range(256))[::-1] * 2  # starts 0xff: msgpack reads a bare -1, not a checkpoint
READERS = (
    ["runs"],
    ["show", "t"],
    ["show", "t", "--json"],
    ["resume", "t"],
    ["answer", "t", "--approve"],
)
# questions decodes only threads whose latest checkpoint holds a question (the paused one)
WAITING_READERS = (*READERS, ["questions"])
DAMAGE = {
    "checkpoint blob": ("UPDATE checkpoints SET checkpoint = ?", JUNK),
    "checkpoint cut short": ("UPDATE checkpoints SET checkpoint = substr(checkpoint, 1, 9)", None),
    "metadata blob": ("UPDATE checkpoints SET metadata = ?", JUNK),
    "unknown serializer": ("UPDATE checkpoints SET type = ?", "pickle"),
    "checkpoint as text": ("UPDATE checkpoints SET checkpoint = ?", "hello"),
    "writes blob": ("UPDATE writes SET value = ?", JUNK),
    "writes serializer": ("UPDATE writes SET type = ?", "pickle"),
}


@pytest.fixture
def paused(server: FakeOpenAI, tmp_path: Path) -> Path:
    """A real CLI run paused for approval (it has checkpoints, metadata and pending writes)."""
    db = tmp_path / "runs.sqlite"
    server.push(tool_call("get_user_billing", user_id=42))
    args = ("--thread", "t", "--db", str(db), "--approve-tool", "get_user_billing")
    assert invoke("run", "refund?", *args).exit_code == 4
    return db


def _damage(db: Path, sql: str, value: object) -> None:
    with sqlite3.connect(db) as conn:
        assert conn.execute(sql, () if value is None else (value,)).rowcount > 0


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("args", WAITING_READERS, ids=" ".join)
def test_garbage_rows_are_one_line_naming_the_thread(
    paused: Path, server: FakeOpenAI, damage: str, args: list[str]
) -> None:
    _damage(paused, *DAMAGE[damage])
    out = invoke(*args, "--db", str(paused))  # runs too: it reads the goal in the writes
    assert out.exit_code == 1, (out.stdout, out.stderr)
    assert out.stdout == ""
    assert out.stderr.startswith("gated-react: error: ")
    assert out.stderr.count("\n") == 1
    assert "thread 't'" in out.stderr
    assert "cannot be read" in out.stderr
    assert len(server.requests) == 1  # resume ran nothing


@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_a_checkpoint_that_names_a_callable_runs_nothing(
    paused: Path, server: FakeOpenAI, tmp_path: Path, args: list[str]
) -> None:
    """A row edited to hold ``os.system("touch ...")`` as a msgpack extension value: every
    reader refuses it in one line, exit 1, and the command never runs."""
    from gated_react import open_checkpointer

    from ..support.tamper import poison, touch

    with open_checkpointer(str(paused)) as saver:
        poison(saver, "t", {"answer": touch(tmp_path / "x")})
    out = invoke(*args, "--db", str(paused))
    assert out.exit_code == 1, (out.stdout, out.stderr)
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1
    assert "thread 't'" in out.stderr
    assert "os.system, which gated-react does not revive" in out.stderr
    assert not (tmp_path / "x").exists()
