"""A store names a stored state model ``gated_react.state.<class>`` whichever module of the
package defines it, and a store written by an earlier release reads and resumes with the code of
today: its names still revive, and every record it holds still validates.
``snapshots/state-fed4ec3.sqlite`` was written at fed4ec3, when ``state`` was one module
(``snapshots/make_old_store.py`` says how)."""

from __future__ import annotations

import copy
import importlib
import json
import pickle
import pkgutil
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

import gated_react.state
from gated_react import build_graph, open_checkpointer, read, resume
from gated_react.errors import MisroutedStep, stranded_line
from gated_react.graph import idle_graph
from gated_react.state import (
    CHANNELS,
    Answer,
    Call,
    Ending,
    Extension,
    FinalAction,
    HistoryEntry,
    Outcome,
    Reply,
    Retry,
    RunContext,
    RunInput,
    RunReply,
    RunResult,
    Shown,
    Step,
    ToolAction,
    ToolCalls,
    TraceEntry,
    Usage,
)
from gated_react.state.base import StrictModel
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from .snapshots.make_old_store import APPROVAL, GOAL, STORE, THREADS, summary
from .support.cli import invoke

TOOL = ToolAction(name="search", args={"q": "refund"}, id="call_1")
REPLY = Reply(id="r1", text="", tool_calls=[{"name": "search", "args": {"q": "refund"}, "id": "c"}])
EXAMPLES = [
    REPLY,
    TOOL,
    ToolCalls(calls=[TOOL, TOOL.model_copy(update={"id": "call_2"})]),
    FinalAction(answer="USD 49"),
    Retry(why="no_action", message="say something", count=1),
    Outcome(ok=True, text='{"hits": 1}'),
    Shown(text="not allowed", error="tool_denied:search"),
    Call(id="c", tool="search", args={}, key="k", outcome=Outcome(ok=False)),
    Answer(text="USD 49", data={"usd": 49}),
    Ending(reason="max_steps", message="max_steps 8 reached (9 requested)", step=8),
    Step(run="q", reply=REPLY, calls=[Call(id="c", tool="search", key="k")]),
    HistoryEntry(step=1, action=TOOL, observation="ok"),
    TraceEntry(step=1, tool="search", args_hash="ab12", ok=True),
    Usage(steps=2, cost=None, unpriced="unknown model"),
    Extension(budget="max_steps", limit=4, was=2, spent=2, decision="approve", step=2),
    RunContext(
        model_class="m.C", model="m", protocol="tools", policy={}, policy_hash="h", version="v"
    ),
    RunInput(goal="refund?"),
    RunResult(status="ok", stop_reason="success"),
    RunReply(status="stopped", stop_reason="max_steps"),
]
"""One of each model the package defines."""


def _package_models() -> set[type[BaseModel]]:
    """Every model the modules of ``gated_react.state`` define or import from one another."""
    package = Path(gated_react.state.__file__).parent
    found: set[type[BaseModel]] = set()
    for info in pkgutil.iter_modules([str(package)]):
        module = importlib.import_module(f"gated_react.state.{info.name}")
        found |= {
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, BaseModel)
            and value.__module__.startswith("gated_react.state")
        }
    return found


def test_every_model_is_named_by_the_package_whichever_module_defines_it() -> None:
    """A model left out of ``gated_react.state``'s names would be stored as
    ``gated_react.state.<module>.<class>``, which the serializer does not revive."""
    models = _package_models()
    assert {type(example) for example in EXAMPLES} == models - {StrictModel}
    for model in models - {StrictModel}:
        assert model.__module__ == "gated_react.state", model
        assert getattr(gated_react.state, model.__name__) is model
        assert model.__name__ in gated_react.state.__all__
    assert StrictModel.__module__ == "gated_react.state.base"  # never stored: it has no fields


def _names(data: bytes) -> list[tuple[str, str]]:
    """The (module, class) of every extension value in ``data``, nested ones included."""
    names: list[tuple[str, str]] = []

    def hook(code: int, raw: bytes) -> None:
        found = ormsgpack.unpackb(raw, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        names.append((found[0], found[1]))

    ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
    return names


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: type(example).__name__)
def test_a_model_is_stored_as_gated_react_state_and_read_back_whole(example: BaseModel) -> None:
    """LangGraph's serializer writes the name; the one every checkpointer here reads with
    revives it. Copies and pickles keep the class too."""
    kind, data = JsonPlusSerializer().dumps_typed(example)
    assert kind == "msgpack"
    assert _names(data)[-1] == ("gated_react.state", type(example).__name__)
    with open_checkpointer("memory") as saver:
        assert saver.serde.loads_typed((kind, data)) == example
    assert pickle.loads(pickle.dumps(example)) == example
    assert copy.deepcopy(example) == example


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


TABLES = ("checkpoints", "writes")


def _rows(store: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row LangGraph's SQLite saver keeps a thread in."""
    with sqlite3.connect(store) as conn:
        rows = {t: sorted(conn.execute(f"SELECT * FROM {t}"), key=repr) for t in TABLES}
    conn.close()
    return rows


def _models(value: Any) -> Iterator[type[BaseModel]]:
    """The types of every model in ``value``, nested ones included."""
    if isinstance(value, BaseModel):
        yield type(value)
        value = dict(value)
    if isinstance(value, dict | list | tuple):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _models(item)


ENDS = ("thread_id", "status", "stop_reason", "message", "answer", "pending", "messages")
"""What a thread says of how its run ended: its state's own channels."""


def _read_back(store: Path) -> dict[str, dict[str, Any]]:
    with open_checkpointer(str(store)) as saver:
        graph = idle_graph(saver)
        return {thread: summary(read(graph, thread)) for thread in THREADS}


def test_every_thread_reads_its_end_as_the_release_that_wrote_it_read_it(store: Path) -> None:
    """As it read them, but the paused run, which says why no answer can continue it."""
    expected = json.loads(STORE.with_suffix(".json").read_text())
    assert sorted(expected) == sorted(THREADS)
    expected["paused"]["message"] = stranded_line("paused", "gate")
    for thread, found in _read_back(store).items():
        assert {k: found[k] for k in ENDS} == {k: expected[thread][k] for k in ENDS}, thread


@pytest.mark.xfail(
    strict=True,
    reason="src: a thread stored before the run's record existed reads with an empty trace "
    "and no structured_response, and its not-run answers count in its history: the channels "
    "that held them are no longer read, and nothing migrates them to a record (its usage is "
    "shown as stored)",
)
def test_every_thread_reads_its_record_as_the_release_that_wrote_it_read_it(store: Path) -> None:
    expected = json.loads(STORE.with_suffix(".json").read_text())
    for thread, found in _read_back(store).items():
        assert found == expected[thread], thread


def test_every_checkpoint_and_write_revives(store: Path) -> None:
    """Every checkpoint of every thread and every pending write loads (a name the serializer
    no longer allows is ``UnsafeCheckpoint`` here), an input stored as ``RunInput`` among
    them, and every snapshot shows only channels of today's ``State``."""
    inputs: list[Any] = []
    with open_checkpointer(str(store)) as saver:
        graph = idle_graph(saver)
        for thread in THREADS:
            snapshots = list(graph.get_state_history(_config(thread)))
            assert len(snapshots) > 5, thread
            for snapshot in snapshots:
                assert set(snapshot.values) <= set(CHANNELS), thread
            for stored in saver.list(_config(thread)):
                inputs += stored.checkpoint["channel_values"].values()
                inputs += [value for _, _, value in stored.pending_writes or ()]
    revived = [value for value in inputs if isinstance(value, RunInput)]
    assert [value.goal for value in revived] == [GOAL]


@pytest.mark.parametrize("thread", THREADS)
def test_the_cli_shows_every_thread(store: Path, thread: str) -> None:
    shown = invoke("show", thread, "--db", str(store), "--json", "--no-log")
    assert shown.exit_code == 0, shown.stderr
    expected = json.loads(STORE.with_suffix(".json").read_text())[thread]
    assert json.loads(shown.stdout)["status"] == expected["status"]
    assert json.loads(shown.stdout)["stop_reason"] == expected["stop_reason"]


def test_the_paused_run_refuses_in_one_line_and_a_new_message_goes_on(store: Path) -> None:
    """Its step was never written (the release had none): resuming it is refused in one line
    that says what to do, nothing runs or is written, and the thread takes a new message."""
    before = _rows(store)
    with open_checkpointer(str(store)) as saver:
        model = ScriptedChatModel(replies=["USD 49."])
        graph = build_graph(model, SUPPORT_TOOLS, policy=APPROVAL, checkpointer=saver)
        paused = read(graph, "paused")
        with pytest.raises(MisroutedStep) as refused:
            resume(graph, "paused", {"approved": True}, question=paused["pending"][0]["id"])
        assert "\n" not in str(refused.value)
        assert "send a new message (or goal) to start a new run" in str(refused.value)
        assert _rows(store) == before
        out = graph.invoke({"messages": [("user", "and now?")]}, _config("paused"))
    assert out["stop_reason"] == "success"
