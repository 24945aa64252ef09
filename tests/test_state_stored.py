"""A store written by an earlier release reads and resumes with the code of today: the names
the store gave the state's types (``gated_react.state.RunInput``, ...) still revive, and every
record it holds still validates. ``snapshots/state-fed4ec3.sqlite`` was written at fed4ec3, when
``state`` was one module (``snapshots/make_old_store.py`` says how)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from gated_react import build_graph, open_checkpointer, read, resume
from gated_react.graph import idle_graph
from gated_react.state import (
    Call,
    Extension,
    FinalAction,
    HistoryEntry,
    Outcome,
    Reply,
    Retry,
    RunContext,
    RunInput,
    State,
    ToolAction,
    ToolCalls,
    TraceEntry,
    Usage,
)
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from .snapshots.make_old_store import ANSWER, APPROVAL, GOAL, STORE, THREADS, summary
from .support.cli import invoke

STORED = {Call, Extension, FinalAction, HistoryEntry, Outcome, Reply, Retry, RunContext}
STORED |= {State, ToolAction, ToolCalls, TraceEntry, Usage}
"""The state's models the store's rows hold as fields, each in some thread."""


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the old store (reading it writes: the locks, a resume's checkpoints)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    for name in ("GATED_REACT_DB", "GATED_REACT_STORE", "GATED_REACT_STORE_KEY"):
        monkeypatch.delenv(name, raising=False)
    shutil.copyfile(STORE, tmp_path / "runs.sqlite")
    return tmp_path / "runs.sqlite"


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _models(value: Any) -> Iterator[type[BaseModel]]:
    """The types of every model in ``value``, nested ones included."""
    if isinstance(value, BaseModel):
        yield type(value)
        value = dict(value)
    if isinstance(value, dict | list | tuple):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _models(item)


def test_every_thread_reads_as_the_release_that_wrote_it_read_it(store: Path) -> None:
    expected = json.loads(STORE.with_suffix(".json").read_text())
    assert sorted(expected) == sorted(THREADS)
    with open_checkpointer(str(store)) as saver:
        graph = idle_graph(saver)
        for thread in THREADS:
            assert summary(read(graph, thread)) == expected[thread], thread


def test_every_checkpoint_and_write_revives_and_validates(store: Path) -> None:
    """Every checkpoint of every thread and every pending write loads (a name the serializer
    no longer allows is ``UnsafeCheckpoint`` here), and every state validates as today's
    ``State``: together they hold each of its models, and an input stored as ``RunInput``."""
    found: set[type[BaseModel]] = set()
    inputs: list[Any] = []
    with open_checkpointer(str(store)) as saver:
        graph = idle_graph(saver)
        for thread in THREADS:
            snapshots = list(graph.get_state_history(_config(thread)))
            assert len(snapshots) > 5, thread
            for snapshot in snapshots:
                found |= set(_models(State.model_validate(snapshot.values)))
            for stored in saver.list(_config(thread)):
                inputs += stored.checkpoint["channel_values"].values()
                inputs += [value for _, _, value in stored.pending_writes or ()]
    assert found >= STORED, STORED - found
    revived = [value for value in inputs if isinstance(value, RunInput)]
    assert [value.goal for value in revived] == [GOAL]


@pytest.mark.parametrize("thread", THREADS)
def test_the_cli_shows_every_thread(store: Path, thread: str) -> None:
    shown = invoke("show", thread, "--db", str(store), "--json", "--no-log")
    assert shown.exit_code == 0, shown.stderr
    expected = json.loads(STORE.with_suffix(".json").read_text())[thread]
    assert json.loads(shown.stdout)["status"] == expected["status"]
    assert json.loads(shown.stdout)["stop_reason"] == expected["stop_reason"]


def test_the_paused_run_resumes_to_its_answer_with_an_approval(store: Path) -> None:
    with open_checkpointer(str(store)) as saver:
        model = ScriptedChatModel(replies=[ANSWER])
        graph = build_graph(model, SUPPORT_TOOLS, policy=APPROVAL, checkpointer=saver)
        paused = read(graph, "paused")
        assert [(q["kind"], q.get("tool")) for q in paused["pending"]] == [
            ("approval", "get_user_billing")
        ]
        done = resume(graph, "paused", {"approved": True}, question=paused["pending"][0]["id"])
    assert (done["status"], done["stop_reason"], done["answer"]) == ("ok", "success", ANSWER)
    assert [entry["action"]["name"] for entry in done["history"]] == [
        "get_user_profile",
        "get_user_billing",
    ]
    assert done["pending"] == []
    assert done["usage"]["tool_calls"] == 2
    with open_checkpointer(str(store)) as saver:
        assert read(idle_graph(saver), "paused") == done
