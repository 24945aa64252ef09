"""A valid SQLite file whose checkpoint rows hold garbage: every command that reads the thread
says so in one line naming it and exits 1, never a traceback; the listings show it as
``damaged`` and go on."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ..support.cli import invoke
from ..support.openai_server import FakeOpenAI, tool_call

JUNK = bytes(range(256))[::-1] * 2  # starts 0xff: msgpack reads a bare -1, not a checkpoint
READERS = (
    ["show", "t"],
    ["show", "t", "--json"],
    ["resume", "t"],
    ["answer", "t", "--approve"],
)
# questions decodes only threads whose latest checkpoint holds a question (the paused ones)
LISTINGS = (["runs"], ["questions"])
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
    """Real CLI runs paused for approval (they have checkpoints, metadata and pending writes):
    thread ``t``, to damage, and ``u``, left whole."""
    db = tmp_path / "runs.sqlite"
    for thread in ("t", "u"):
        server.push(tool_call("get_user_billing", user_id=42))
        args = ("--thread", thread, "--db", str(db), "--approve-tool", "get_user_billing")
        assert invoke("run", "refund?", *args).exit_code == 4
    return db


def _damage(db: Path, sql: str, value: object) -> None:
    """``sql`` run on thread ``t``'s rows."""
    with sqlite3.connect(db) as conn:
        params = ("t",) if value is None else (value, "t")
        assert conn.execute(f"{sql} WHERE thread_id = ?", params).rowcount > 0


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("args", LISTINGS, ids=" ".join)
def test_a_listing_shows_a_damaged_thread_and_goes_on(
    paused: Path, damage: str, args: list[str]
) -> None:
    """Before: ``runs`` and ``questions`` failed whole (exit 1) on the damaged thread."""
    _damage(paused, *DAMAGE[damage])
    out = invoke(*args, "--db", str(paused), "--json")
    assert out.exit_code == 0, (out.stdout, out.stderr)
    rows = {row["thread_id"]: row for row in json.loads(out.stdout)[args[0]]}
    assert {t: row["status"] for t, row in rows.items()} == {"t": "damaged", "u": "paused"}
    assert "cannot be read" in rows["t"]["problem"]
    assert rows["u"]["problem"] is None
    if args == ["runs"]:  # pruned by its status: the store reads whole again
        pruned = invoke("prune", "--db", str(paused), "--status", "damaged")
        assert pruned.exit_code == 0, (pruned.stdout, pruned.stderr)
        listed = invoke("runs", "--db", str(paused), "--json")
        assert [row["thread_id"] for row in json.loads(listed.stdout)["runs"]] == ["u"]


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("args", READERS, ids=" ".join)
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
    assert len(server.requests) == 2  # one run each; resume ran nothing


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
    listed = invoke("runs", "--db", str(paused), "--json")
    statuses = {row["thread_id"]: row["status"] for row in json.loads(listed.stdout)["runs"]}
    assert statuses == {"t": "damaged", "u": "paused"}
    assert not (tmp_path / "x").exists()
