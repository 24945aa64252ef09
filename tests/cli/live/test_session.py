"""Driving a run from the CLI: what a failing store leaves the user to go on with."""

from __future__ import annotations

import json
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


def _session(saver: Any, url: str, runlog: RunLog) -> Session:
    """A CLI session of thread ``t`` run with ``--toolkit support`` on ``url``."""
    place = Place(db=url, json_out=True, again=("--toolkit", "support"))
    return Session(Tracker("t", saver), None, runlog, (), place)
