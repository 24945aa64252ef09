"""``gated-react delete`` and ``prune`` (issue 45): a thread removed from everywhere the CLI
keeps it (the store, the run log file, an example run's files), by id or by age and status;
``--dry-run`` deletes nothing; bad input and threads held by a run are one line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gated_react import build_graph, open_checkpointer, run
from gated_react.records.run_log import RunLog, forget_lines
from gated_react.store.locks import thread_lock
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from ...support.cli import REFUND, invoke
from ...support.openai_server import FakeOpenAI, reply, tool_call


def _runs(*args: str) -> list[str]:
    out = invoke("runs", "--json", *args)
    assert out.exit_code == 0, out.stderr
    return [row["thread_id"] for row in json.loads(out.stdout)["runs"]]


def _logged(state_dir: Path) -> set[str]:
    log = state_dir / "runs.sqlite.log"
    return {json.loads(line)["thread"] for line in log.read_text().splitlines()}


@pytest.fixture
def four(server: FakeOpenAI, state_dir: Path) -> str:
    """Runs stopped, ok (an example's, with its own files), paused, ok, oldest first; the
    moment between the second and the third."""
    server.push(*REFUND[:2])
    assert invoke("run", "stop", "--thread", "t1-stopped", "--max-tool-calls", "1").exit_code == 2
    server.push(tool_call("query_database", sql="SELECT 1"), reply("one"))
    assert invoke("run", "--example", "002", "--thread", "t2-example").exit_code == 0
    between = datetime.now(UTC).isoformat()
    server.push(tool_call("get_user_billing", user_id=42))
    args = ("--thread", "t3-paused", "--approve-tool", "get_user_billing")
    assert invoke("run", "pause", *args).exit_code == 4
    server.push(reply("fine"))
    assert invoke("run", "hi", "--thread", "t4-ok").exit_code == 0
    return between


def test_delete_removes_a_thread_from_the_store_its_log_and_its_files(
    four: str, state_dir: Path
) -> None:
    """Before: there was no way to delete a thread; LangGraph's own left its run log lines."""
    assert (state_dir / "examples" / "t2-example").is_dir()
    out = invoke("delete", "t2-example", "t3-paused", "--json")
    assert out.exit_code == 0, out.stderr
    deleted = json.loads(out.stdout)["deleted"]
    assert set(deleted["t2-example"]) == {
        "checkpoints", "pending writes", "call records", "run log file lines", "example files",
    }  # fmt: skip
    assert set(deleted["t3-paused"]) == {
        "checkpoints", "pending writes", "call records", "run log file lines",
    }  # fmt: skip
    assert _runs() == ["t4-ok", "t1-stopped"]
    assert _logged(state_dir) == {"t1-stopped", "t4-ok"}
    assert not (state_dir / "examples" / "t2-example").exists()
    assert invoke("show", "t4-ok").exit_code == 0
    assert invoke("questions", "--json").stdout.count("thread_id") == 0


def test_delete_of_an_unknown_or_busy_thread_is_one_line_and_the_rest_go(
    four: str, state_dir: Path
) -> None:
    with open_checkpointer(str(state_dir / "runs.sqlite")) as saver, thread_lock(saver, "t4-ok"):
        out = invoke("delete", "t1-stopped", "nope", "t4-ok")
    assert out.exit_code == 1
    assert out.stderr.count("\n") == 1
    assert "not deleted: 'nope' (not in this store), 't4-ok' (a run is advancing it)" in out.stderr
    assert out.stdout.startswith("deleted t1-stopped: ")
    assert _runs() == ["t4-ok", "t3-paused", "t2-example"]


def test_prune_by_age_and_status_and_its_dry_run(four: str, state_dir: Path) -> None:
    """Before: no prune; ``runs`` could not even say which runs were old or stopped."""
    dry = invoke("prune", "--older-than", four, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == ["thread", "t2-example", "t1-stopped"]
    assert {line.index(" 20") for line in lines[1:-1]} == {lines[0].index("updated") - 1}
    assert dry.stdout.splitlines()[-1].startswith("2 runs would be deleted from ")
    assert len(_runs()) == 4  # nothing deleted
    out = invoke("prune", "--status", "paused", "--status", "stopped", "--json")
    assert out.exit_code == 0, out.stderr
    assert set(json.loads(out.stdout)["deleted"]) == {"t3-paused", "t1-stopped"}
    assert invoke("prune", "--older-than", four, "--status", "ok").exit_code == 0
    assert _runs() == ["t4-ok"]
    assert _logged(state_dir) == {"t4-ok"}
    none = invoke("prune", "--older-than", "30d", "--status", "ok").stdout
    assert none.startswith("nothing deleted: no ok runs before 20")
    assert none.rstrip().endswith("runs.sqlite")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "prune needs --older-than AGE, --status STATUS or both"),
        (["--older-than", "soon"], "'soon' is neither an age nor a date"),
        (["--status", "gone"], "unknown status 'gone'"),
    ],
)
def test_a_prune_without_a_bound_or_with_a_bad_one_is_one_line(
    state_dir: Path, args: list[str], says: str
) -> None:
    out = invoke("prune", *args)
    assert out.exit_code == 1
    assert says in out.stderr
    assert out.stderr.count("\n") == 1


def test_forgetting_lines_keeps_what_a_run_appends_after(tmp_path: Path) -> None:
    """A run's log stays open for the whole run: the file is rewritten in place, so what the
    run writes next lands after the lines kept (not in a file that was replaced)."""
    path = tmp_path / "runs.log"
    event: dict[str, Any] = {"time": "t", "thread": "gone", "node": "decide"}
    with RunLog(path) as log:
        for thread in ("gone", "kept", "gone"):
            log.write({**event, "thread": thread})
        assert forget_lines(path, ["gone"]) == {"gone": 2}
        log.write({**event, "thread": "later"})
    threads = [json.loads(line)["thread"] for line in path.read_text().splitlines()]
    assert threads == ["kept", "later"]


def test_a_dry_run_leaves_a_run_another_process_advances_as_prune_leaves_it(
    state_dir: Path,
) -> None:
    """Before: ``prune --dry-run`` listed a running run among those it would delete, which
    the prune then left."""
    db = state_dir / "runs.sqlite"
    with open_checkpointer(str(db)) as saver:
        graph = build_graph(ScriptedChatModel(replies=[_crash]), SUPPORT_TOOLS,
                            checkpointer=saver)  # fmt: skip
        with pytest.raises(_Crash):
            run(graph, "crashes", thread_id="busy")
        with thread_lock(saver, "busy"):
            dry = json.loads(invoke("prune", "--status", "running", "--dry-run", "--json").stdout)
            text = invoke("prune", "--status", "running", "--dry-run").stdout
            pruned = invoke("prune", "--status", "running")
    assert dry["runs"] == []
    assert dry["left"] == {"busy": "a run is advancing it"}
    assert "0 runs would be deleted" in text
    assert "left: busy: a run is advancing it" in text
    assert pruned.stdout.splitlines() == ["skipped busy: a run is advancing it", "nothing deleted"]


class _Crash(BaseException):
    """Stands in for a process dying mid-run."""


def _crash(_messages: object) -> None:
    raise _Crash
