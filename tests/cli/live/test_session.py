"""Driving a run from the CLI: what a failing store leaves the user to go on with."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gated_react.cli.exits import CliError
from gated_react.cli.live.session import Place, Session
from gated_react.records.events import Tracker
from gated_react.records.run_log import RunLog
from gated_react.runs import run_book
from gated_react.store.checkpointer import open_checkpointer


def test_a_failed_store_says_how_to_resume_when_its_record_cannot_be_read(tmp_path: Path) -> None:
    """The store's connection is gone: the run fails reading its record, and so does the note
    of the failure, which reads what the run spent. Before, that second error replaced the
    line saying the steps are kept and how to resume."""
    url = str(tmp_path / "runs.sqlite")
    with open_checkpointer(url) as saver:
        pass  # closed: every read of the store fails, as after a lost connection
    log = tmp_path / "runs.log"

    def start(_on_update: Any) -> Any:
        return run_book(saver, "t")

    with RunLog(log) as runlog, pytest.raises(CliError) as failed:
        _session(saver, url, runlog).drive(start)
    said = str(failed.value)
    assert said.startswith("the store failed during the run: ")
    assert said.endswith(f"continue once it works again with: gated-react resume t "
                         f"--toolkit support --db {url}")  # fmt: skip
    (noted,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert (noted["decision"], noted["step"]) == ("failed", 0)  # its counters left unread


def test_a_call_whose_time_the_store_cannot_record_ends_with_the_resume_command(
    tmp_path: Path,
) -> None:
    """The store failed while a call was under way (a full disk, a restarted server): the
    call is abandoned, and the line ends with the command that continues the run."""
    from gated_react._engine.authority.waiting import unrecorded

    url = str(tmp_path / "runs.sqlite")

    def start(_on_update: Any) -> Any:
        raise unrecorded("the model call", OSError("database or disk is full"))

    with (
        open_checkpointer(url) as saver,
        RunLog(tmp_path / "runs.log") as runlog,
        pytest.raises(CliError) as failed,
    ):
        _session(saver, url, runlog).drive(start)
    said = str(failed.value)
    assert said.startswith("the run's store could not record how long the model call has taken")
    assert "workers" not in said
    assert said.endswith(f"resume the run once the store answers with: gated-react resume t "
                         f"--toolkit support --db {url}")  # fmt: skip


def _refusing_writes(after: int) -> Any:
    """SqliteSaver.put that refuses every write after the first ``after``, as a store made
    read-only refuses them."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    put, done = SqliteSaver.put, [0]

    def refusing(self: Any, *args: Any, **kwargs: Any) -> Any:
        done[0] += 1
        if done[0] > after:
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return put(self, *args, **kwargs)

    return refusing


@pytest.mark.parametrize("stored", [0, 3])
def test_a_store_that_refuses_writes_says_resume_only_if_the_thread_holds_a_run(
    stored: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new thread whose first write the store refused holds nothing: no ``resume`` finds it
    ("no run is stored"), so the line says to fix the store and run the goal again. Before,
    it offered the resume command. A thread with steps stored is resumed as before."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from gated_react import build_graph, run
    from gated_react.testing import ScriptedChatModel, call
    from gated_react.tools.support import SUPPORT_TOOLS

    url = str(tmp_path / "runs.sqlite")
    model = ScriptedChatModel(replies=[call("get_user_profile", user_id=42), "done"])
    monkeypatch.setattr(SqliteSaver, "put", _refusing_writes(stored))
    with open_checkpointer(url) as saver, RunLog(tmp_path / "runs.log") as runlog:
        graph = build_graph(model, SUPPORT_TOOLS, checkpointer=saver)
        session = _session(saver, url, runlog)
        with pytest.raises(CliError) as failed:
            session.drive(lambda watch: run(graph, "g", thread_id="t"))
    said = str(failed.value)
    assert "attempt to write a readonly database" in said
    if stored:
        assert said.endswith(f"gated-react resume t --toolkit support --db {url}")
        return
    assert "resume t" not in said
    assert said.startswith("the store failed before the run stored anything: ")
    assert "thread 't' holds nothing to resume" in said
    assert said.endswith("give a writable one with --db, then run the goal again")


def _session(saver: Any, url: str, runlog: RunLog) -> Session:
    """A CLI session of thread ``t`` run with ``--toolkit support`` on ``url``."""
    place = Place(db=url, json_out=True, again=("--toolkit", "support"))
    return Session(Tracker("t", saver), None, runlog, (), place)
