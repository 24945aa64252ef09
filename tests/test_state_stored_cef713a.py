"""Stores written by the release before 0.1.0 (cef713a, before the run's record) keep working
with the code of today, on SQLite and on Postgres (its ``pg_dump`` restored): every thread
lists, shows and reads without a traceback; the paused and the crashed run, whose step that
release never recorded, say so in one line, and refusing to continue them leaves the store's
rows as they were. ``snapshots/make_cef713a_stores.py`` says how the stores were written."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gated_react import aopen_checkpointer, aresume, build_graph, open_checkpointer, read, resume
from gated_react.errors import MisroutedStep
from gated_react.graph import idle_graph
from gated_react.testing import ScriptedChatModel

from .snapshots.make_cef713a_stores import (
    ANSWER,
    APPROVAL,
    DUMP,
    GOAL,
    PAID,
    READ,
    SQLITE,
    THREADS,
    TOOLS,
    restore,
    summary,
)
from .support.cli import invoke

EXPECTED: dict[str, Any] = json.loads(READ.read_text())
ENDS = ("thread_id", "status", "stop_reason", "answer", "pending", "messages")
"""What a thread says of how its run ended, as cef713a read it (``message`` is told apart)."""
STRANDED = {"paused": "left at gate", "crashed": "left at execute"}
"""The threads cef713a left inside a step, and where."""
TABLES = {
    "sqlite": ("checkpoints", "writes"),
    "postgres": ("checkpoints", "checkpoint_blobs", "checkpoint_writes"),
}
"""Where LangGraph's savers keep a thread: the rows a refusal must leave as they were."""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A copy of the old store: the SQLite file, or the dump restored into a fresh database."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    for name in ("GATED_REACT_DB", "GATED_REACT_STORE", "GATED_REACT_STORE_KEY"):
        monkeypatch.delenv(name, raising=False)
    if request.param == "sqlite":
        shutil.copyfile(SQLITE, tmp_path / "runs.sqlite")
        yield str(tmp_path / "runs.sqlite")
        return
    url = request.getfixturevalue("pg_url")
    restore(url)
    yield url


def _kind(url: str) -> str:
    return "postgres" if url.startswith("postgresql") else "sqlite"


def _rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables a thread is kept in."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    if _kind(url) == "sqlite":
        with sqlite3.connect(url) as conn:
            for table in TABLES["sqlite"]:
                found[table] = sorted(conn.execute(f"SELECT * FROM {table}"), key=repr)
        conn.close()
        return found
    import psycopg

    with psycopg.connect(url) as pg:
        for table in TABLES["postgres"]:
            rows = pg.execute(f"SELECT * FROM {table}").fetchall()
            found[table] = sorted(rows, key=repr)
    return found


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def test_the_store_holds_the_four_threads_as_cef713a_read_them() -> None:
    """The fixture is what its docstring says (a regenerated one must be too)."""
    for store in ("sqlite", "postgres"):
        read_back = EXPECTED[store]
        assert sorted(read_back) == sorted(THREADS)
        assert [read_back[t]["status"] for t in THREADS] == ["paused", "ok", "stopped", None]
        assert read_back["ok"]["usage"]["cost"] > 0
        assert read_back["stopped"]["stop_reason"] == "max_tool_calls"
        assert read_back["crashed"]["usage"]["per_tool"]["issue_refund"] == 1
    assert SQLITE.stat().st_size + DUMP.stat().st_size < 600_000


def test_the_library_reads_every_thread_as_cef713a_did(store: str) -> None:
    with open_checkpointer(store) as saver:
        found = {t: summary(read(idle_graph(saver), t)) for t in THREADS}
    for thread in THREADS:
        expected = EXPECTED[_kind(store)][thread]
        assert {k: found[thread][k] for k in ENDS} == {k: expected[k] for k in ENDS}, thread
        if thread in STRANDED:
            assert STRANDED[thread] in found[thread]["message"]
            assert "\n" not in found[thread]["message"]
        else:
            assert found[thread]["message"] == expected["message"]


def test_runs_lists_every_thread(store: str) -> None:
    listed = invoke("runs", "--db", store, "--json")
    assert listed.exit_code == 0, listed.stderr
    statuses = {row["thread_id"]: row["status"] for row in json.loads(listed.stdout)["runs"]}
    assert statuses == {
        "paused": "paused",
        "ok": "ok",
        "stopped": "stopped",
        "crashed": "unfinished",
    }


@pytest.mark.parametrize("thread", THREADS)
def test_show_shows_every_thread_and_why_a_stranded_one_cannot_go_on(
    store: str, thread: str
) -> None:
    shown = invoke("show", thread, "--db", store, "--no-log")
    assert shown.exit_code == 0, shown.stderr
    assert "Traceback" not in shown.stdout + shown.stderr
    as_json = invoke("show", thread, "--db", store, "--json", "--no-log")
    result = json.loads(as_json.stdout)
    expected = EXPECTED[_kind(store)][thread]
    assert (result["status"], result["stop_reason"]) == (
        expected["status"] or "unfinished",  # as ``runs`` lists a run that has not ended
        expected["stop_reason"],
    )
    if thread in STRANDED:
        assert STRANDED[thread] in result["message"]
        assert "before 0.1.0" in " ".join(shown.stdout.split())
    if thread == "crashed":
        assert "whether its last tool call ran is unknown" in result["message"]


def test_approving_the_paused_run_is_refused_in_one_line_and_changes_no_row(store: str) -> None:
    """cef713a kept the call it asked about in channels read no more: no answer can run it
    (what would run must come from the run's own step, never from such a read). The refusal
    says what to do, and a new message on the thread then runs."""
    before = _rows(store)
    with open_checkpointer(store) as saver:
        model = ScriptedChatModel(replies=[ANSWER])
        graph = build_graph(model, TOOLS, policy=APPROVAL, checkpointer=saver)
        paused = read(graph, "paused")
        assert [q["tool"] for q in paused["pending"]] == ["get_user_billing"]
        with pytest.raises(MisroutedStep) as refused:
            resume(graph, "paused", {"approved": True}, question=paused["pending"][0]["id"])
        line = str(refused.value)
        assert "\n" not in line
        assert "thread 'paused' was left at gate by gated-react before 0.1.0" in line
        assert "ask its question again" in line
        assert _rows(store) == before
        assert read(graph, "paused") == paused
        graph.invoke({"goal": GOAL}, _config("paused"))
        asked_again = read(graph, "paused")
    assert (asked_again["stop_reason"], asked_again["answer"]) == ("success", ANSWER)


def test_the_async_twin_refuses_the_same_way(store: str) -> None:
    async def main() -> str:
        async with aopen_checkpointer(store) as saver:
            graph = build_graph(ScriptedChatModel(replies=[ANSWER]), TOOLS, checkpointer=saver)
            with pytest.raises(MisroutedStep) as refused:
                await aresume(graph, "paused", {"approved": True})
            return str(refused.value)

    before = _rows(store)
    assert "left at gate by gated-react before 0.1.0" in asyncio.run(main())
    assert _rows(store) == before


def test_the_crashed_run_is_refused_and_its_refund_is_not_made_again(store: str) -> None:
    """Nothing in the store says whether its refund was made: continuing it could pay twice,
    so it is refused in one line that says the call's outcome is unknown."""
    before = _rows(store)
    PAID.clear()
    with open_checkpointer(store) as saver:
        graph = build_graph(ScriptedChatModel(replies=[ANSWER]), TOOLS, checkpointer=saver)
        with pytest.raises(MisroutedStep) as refused:
            resume(graph, "crashed")
    assert "whether its last tool call ran is unknown" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert PAID == []
    assert _rows(store) == before


def test_the_priced_run_reads_its_cost(store: str) -> None:
    """Before: zero usage (the channel that held it is no longer a channel of the state); it
    is shown as stored, and ``show`` prints it."""
    with open_checkpointer(store) as saver:
        found = read(idle_graph(saver), "ok")
    assert found["usage"] == EXPECTED[_kind(store)]["ok"]["usage"]
    shown = json.loads(invoke("show", "ok", "--db", store, "--json", "--no-log").stdout)
    assert shown["usage"]["cost"] == EXPECTED[_kind(store)]["ok"]["usage"]["cost"] > 0
