"""``gated-react runs`` and ``show``: listing a store quickly, one run in full."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gated_react import Policy, Price, build_graph, open_checkpointer, run
from gated_react.records.run_listing import latest_runs, scan
from gated_react.store.locks import thread_lock
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from ...support.cli import REFUND, invoke
from ...support.openai_server import FakeOpenAI, reply, tool_call


class Crash(BaseException):
    """Stands in for a process dying mid-run."""


def _crash(_messages: object) -> None:
    raise Crash


def _unfinished(db: Path, thread: str) -> None:
    with open_checkpointer(str(db)) as saver:
        graph = build_graph(ScriptedChatModel(replies=[_crash]), SUPPORT_TOOLS, checkpointer=saver)
        with pytest.raises(Crash):
            run(graph, "crashes", thread_id=thread)


@pytest.fixture
def store(server: FakeOpenAI, state_dir: Path) -> Path:
    """Four runs, oldest first: ok, stopped, paused, unfinished."""
    server.push(*REFUND)
    assert invoke("run", "refund?", "--thread", "a-ok", "--model", "m-1").exit_code == 0
    server.push(*REFUND[:2])
    assert invoke("run", "stop", "--thread", "b-stopped", "--max-tool-calls", "1").exit_code == 2
    server.push(tool_call("get_user_billing", user_id=42))
    args = ("--thread", "c-paused", "--approve-tool", "get_user_billing")
    assert invoke("run", "pause", *args).exit_code == 4
    _unfinished(state_dir / "runs.sqlite", "d-unfinished")
    return state_dir / "runs.sqlite"


def test_runs_lists_the_newest_first_with_status(store: Path) -> None:
    out = invoke("runs", "--json")
    assert out.exit_code == 0
    listed = json.loads(out.stdout)
    assert listed["total"] == 4
    rows = {row["thread_id"]: row for row in listed["runs"]}
    assert [row["thread_id"] for row in listed["runs"]] == [
        "d-unfinished",
        "c-paused",
        "b-stopped",
        "a-ok",
    ]
    assert {k: r["status"] for k, r in rows.items()} == {
        "a-ok": "ok",
        "b-stopped": "stopped",
        "c-paused": "paused",
        "d-unfinished": "unfinished",
    }
    assert rows["a-ok"]["stop_reason"] == "success"
    assert rows["a-ok"]["steps"] == 4
    assert rows["a-ok"]["model"] == "m-1"
    # the model each run ran on, its default and a program's included (before: null for each)
    assert rows["b-stopped"]["model"] == "gpt-4.1-mini"
    assert rows["d-unfinished"]["model"] == "scripted"
    assert rows["b-stopped"]["stop_reason"] == "max_tool_calls"
    assert rows["a-ok"]["cost"] is None  # m-1 is in no price table
    assert rows["b-stopped"]["cost"] > 0  # gpt-4.1-mini, the default model, is priced


def test_runs_table_and_limit(store: Path) -> None:
    out = invoke("runs", "--limit", "2")
    assert out.exit_code == 0
    lines = out.stdout.splitlines()
    assert lines[0].split()[:2] == ["thread", "status"]
    assert [line.split()[0] for line in lines[1:3]] == ["d-unfinished", "c-paused"]
    assert "2 of 4 runs" in lines[-1]


def test_runs_on_an_empty_store(state_dir: Path) -> None:
    out = invoke("runs")
    assert out.exit_code == 0
    assert out.stdout.startswith("no runs in")  # (wrapped: piped lines end without a space)


class Counting:
    """Counts a saver's checkpoint loads (its own ``get_tuple``, wrapped in place)."""

    def __init__(self, saver: Any) -> None:
        self.loads = 0
        load = saver.get_tuple

        def counted(config: Any) -> Any:
            self.loads += 1
            return load(config)

        saver.get_tuple = counted


def test_listing_loads_only_the_rows_shown(tmp_path: Path) -> None:
    with open_checkpointer(str(tmp_path / "many.sqlite")) as saver:
        graph = build_graph(
            ScriptedChatModel(replies=["done"], cycle=True), SUPPORT_TOOLS, checkpointer=saver
        )
        for i in range(30):
            run(graph, f"goal {i}", thread_id=f"t{i:02d}")
        counting = Counting(saver)
        rows, total = latest_runs(saver, 5)
        assert counting.loads == 5
        assert total == 30
        assert [r.thread_id for r in rows] == ["t29", "t28", "t27", "t26", "t25"]
        assert [thread for thread, _ in scan(saver, 5)[0]] == [r.thread_id for r in rows]


def test_show_prints_history_trace_and_log(store: Path) -> None:
    out = invoke("show", "a-ok")
    assert out.exit_code == 0
    text = out.stdout
    for needle in ("goal  refund?", "history", "trace", "run log", "search_policy", "finish"):
        assert needle in text
    paused = invoke("show", "c-paused")  # the options its checkpoints say, to check
    (asked,) = json.loads(invoke("show", "c-paused", "--json").stdout)["pending"]
    text = paused.stdout
    assert "started with --toolkit support --approve-tool get_user_billing  (as its" in text
    assert f"gated-react resume c-paused OPTIONS --question {asked['id']} --approve" in text


def test_show_json_has_the_result_and_the_logged_events(store: Path) -> None:
    out = invoke("show", "a-ok", "--json")
    assert out.exit_code == 0
    shown = json.loads(out.stdout)
    assert shown["thread_id"] == "a-ok"
    assert len(shown["history"]) == 3
    nodes = [e["node"] for e in shown["events"]]
    assert nodes[0] == "run"
    assert nodes[1:6] == ["decide", "validate", "gate", "execute", "observe"]
    assert nodes[-1] == "finish"
    assert {e["thread"] for e in shown["events"]} == {"a-ok"}
    context = shown["run_context"]
    assert (context["model"], context["protocol"]) == ("m-1", "tools")
    assert shown["events"][1]["context"] == context  # the run log has it once, at decide
    assert [e for e in shown["events"] if "context" in e] == [shown["events"][1]]
    assert shown["usage"]["cost"] is None
    assert "is unpriced" in shown["usage"]["unpriced"]
    assert invoke("show", "a-ok", "--json", "--no-log").stdout.count('"node"') == 0


def test_show_finds_a_moved_log(server: FakeOpenAI, tmp_path: Path) -> None:
    server.push(reply("hi"))
    log = tmp_path / "elsewhere" / "my.log"
    assert invoke("run", "hello", "--thread", "moved", "--log", str(log)).exit_code == 0
    assert log.is_file()
    events = json.loads(invoke("show", "moved", "--json", "--log", str(log)).stdout)["events"]
    assert [e["node"] for e in events] == ["run", "decide", "validate", "finish"]


def _shown_after_a_run(state_dir: Path, policy: Policy, thread: str) -> dict[str, str]:
    """``show``'s summary lines, by label, for a one-step run stored outside the CLI."""
    with open_checkpointer(str(state_dir / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=["done"])
        graph = build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=saver)
        run(graph, "hello", thread_id=thread)
    out = invoke("show", thread)
    assert out.exit_code == 0, out.stderr
    return {line.split("  ")[0]: line for line in out.stdout.splitlines() if "  " in line}


def test_show_prints_the_limits_and_context_the_run_itself_ran_under(state_dir: Path) -> None:
    """A run started outside the CLI (a worker, an app) under its own budget: ``show`` used to
    print the CLI's default limits (``seconds 0.00/20``) for a run under max_seconds=60."""
    priced = Policy().replace(
        max_seconds=60, max_steps=5, max_cost=1, prices={"scripted": Price(input=1, output=2)}
    )
    lines = _shown_after_a_run(state_dir, priced, "elsewhere")
    assert lines["seconds"].split()[1].endswith("/60")
    assert lines["steps"].split()[1] == "1/5"
    assert lines["cost"].split()[1].endswith("/1")
    assert lines["cost"].split()[2] == "USD"
    assert "scripted (gated_react.testing.ScriptedChatModel)" in lines["model"]
    assert lines["priced by"].split()[-1] == "policy"


def test_show_reads_a_run_that_had_no_time_limit(state_dir: Path) -> None:
    """``max_seconds=float("inf")`` was stored as null: ``show`` called the store damaged."""
    unlimited = Policy().replace(max_seconds=float("inf"), tool_timeout_seconds=float("inf"))
    lines = _shown_after_a_run(state_dir, unlimited, "unlimited")
    assert lines["seconds"].split()[1].endswith("/inf")


def _ids(*args: str) -> list[str]:
    out = invoke("runs", "--json", *args)
    assert out.exit_code == 0, out.stderr
    return [row["thread_id"] for row in json.loads(out.stdout)["runs"]]


def test_runs_by_status_and_age(
    server: FakeOpenAI, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``runs`` had no ``--status``, ``--since`` or ``--before`` (a usage error)."""
    monkeypatch.setenv("GATED_REACT_DB", store_url)
    server.push(*REFUND[:2])
    assert invoke("run", "stop", "--thread", "t1-stopped", "--max-tool-calls", "1").exit_code == 2
    server.push(reply("fine"))
    assert invoke("run", "hi", "--thread", "t2-ok").exit_code == 0
    between = datetime.now(UTC).isoformat()
    server.push(tool_call("get_user_billing", user_id=42))
    args = ("--thread", "t3-paused", "--approve-tool", "get_user_billing")
    assert invoke("run", "pause", *args).exit_code == 4
    server.push(reply("fine"))
    assert invoke("run", "hi", "--thread", "t4-ok").exit_code == 0
    assert _ids("--status", "ok") == ["t4-ok", "t2-ok"]
    assert _ids("--status", "ok", "--status", "paused") == ["t4-ok", "t3-paused", "t2-ok"]
    assert _ids("--since", between) == ["t4-ok", "t3-paused"]
    assert _ids("--before", between) == ["t2-ok", "t1-stopped"]
    assert _ids("--before", between, "--status", "stopped") == ["t1-stopped"]
    assert _ids("--since", "1h") == ["t4-ok", "t3-paused", "t2-ok", "t1-stopped"]
    assert _ids("--before", "1h") == []
    assert _ids("--status", "ok", "--limit", "1") == ["t4-ok"]
    counted = json.loads(invoke("runs", "--json", "--since", between).stdout)["total"]
    assert counted == 2
    table = invoke("runs", "--before", between, "--status", "stopped").stdout.splitlines()
    assert table[-1].startswith("1 stopped of 2 runs before ")


def test_a_status_filter_reads_on_past_a_page(
    server: FakeOpenAI, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newest threads are read a page at a time until ``--limit`` of the status are found."""
    from gated_react.records import run_listing

    monkeypatch.setattr(run_listing, "_PAGE", 2)
    for i in range(5):
        server.push(reply("fine") if i % 4 else REFUND[0])
        code = invoke("run", "x", "--thread", f"t{i}", "--max-tool-calls", "0").exit_code
        assert code == (0 if i % 4 else 2)
    assert _ids("--status", "stopped") == ["t4", "t0"]
    assert _ids("--status", "stopped", "--limit", "1") == ["t4"]
    assert _ids("--status", "ok", "--limit", "2") == ["t3", "t2"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--since", "yesterday"], "'yesterday' is neither an age nor a date"),
        (["--before", "3 fortnights"], "is neither an age nor a date"),
        (["--status", "done"], "unknown status 'done'; choose from ok, stopped"),
        # before: OverflowError tracebacks (timedelta, a date before the year 1, SQLite's int)
        (["--since", "99999999999d"], "'99999999999d' is longer than any age"),
        (["--before", "9999999d"], "'9999999d' reaches back before any date"),
        (["--limit", "99999999999999999999"], "less than or equal to 1000000"),
        (["questions", "--limit", "99999999999999999999"], "less than or equal to 1000000"),
        (["queue", "--limit", "99999999999999999999"], "less than or equal to 1000000"),
        (["prune", "--older-than", "99999999999d", "--dry-run"], "is longer than any age"),
    ],
)
def test_a_bad_filter_is_one_line(state_dir: Path, args: list[str], says: str) -> None:
    command = args[0] if args[0] in ("questions", "queue", "prune") else "runs"
    out = invoke(command, *(args[1:] if command != "runs" else args))
    assert out.exit_code == 1
    assert says in out.stderr
    assert out.stderr.count("\n") == 1


def test_an_answer_for_a_thread_another_run_advances_says_so(store: Path) -> None:
    """Before: "is not waiting for an approval; resume it without --approve", while another
    process was running it (and might be about to ask)."""
    with open_checkpointer(str(store)) as saver, thread_lock(saver, "d-unfinished"):
        busy = invoke("answer", "d-unfinished", "--approve")
    assert busy.exit_code == 1
    assert "is being advanced by another run" in busy.stderr
    idle = invoke("answer", "d-unfinished", "--approve")
    assert idle.exit_code == 1
    assert "is not waiting for an approval" in idle.stderr


@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("command", ["show", "resume"])
def test_a_thread_id_that_is_not_utf8_is_said_to_be_so(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, command: str, keyed: bool
) -> None:
    """A byte the shell passed that is no UTF-8 (``$'\\xff'``) reaches Python as a lone
    surrogate. Before: "its stored checkpoint cannot be read (UnicodeEncodeError ...); the store
    is damaged", of a store that was fine (with a key: "edited or damaged")."""
    if keyed:
        monkeypatch.setenv("GATED_REACT_STORE_KEY", "k" * 32)
    out = invoke(command, "\udcff\udcfe")
    assert out.exit_code == 1
    assert out.stderr.count("\n") == 1
    assert "its id is not UTF-8 text" in out.stderr
    assert "damaged" not in out.stderr


def test_a_run_another_process_advances_is_listed_as_running(store: Path) -> None:
    """Before: ``unfinished`` (crashed or killed: resume it) while it ran."""
    with open_checkpointer(str(store)) as saver, thread_lock(saver, "d-unfinished"):
        during = json.loads(invoke("runs", "--json").stdout)["runs"]
        only = json.loads(invoke("runs", "--status", "running", "--json").stdout)["runs"]
    after = json.loads(invoke("runs", "--json").stdout)["runs"]
    assert {r["thread_id"]: r["status"] for r in during}["d-unfinished"] == "running"
    assert [r["thread_id"] for r in only] == ["d-unfinished"]
    assert {r["thread_id"]: r["status"] for r in after}["d-unfinished"] == "unfinished"


def test_a_run_killed_in_its_first_decision_shows_its_goal_and_status(store: Path) -> None:
    """Before: ``show`` printed a blank goal and, in JSON, ``"status": null``, and ``runs`` a
    blank goal (the goal was still in the run's input channel only)."""
    listed = json.loads(invoke("runs", "--json").stdout)["runs"]
    assert {r["thread_id"]: r["goal"] for r in listed}["d-unfinished"] == "crashes"
    shown = json.loads(invoke("show", "d-unfinished", "--json").stdout)
    assert (shown["status"], shown["goal"], shown["messages"]) == ("unfinished", "crashes", [])
    text = invoke("show", "d-unfinished").stdout
    assert text.startswith("goal  crashes\n")
    assert "status       unfinished" in text


def test_show_says_running_for_a_run_another_process_advances(store: Path) -> None:
    """Before: ``unfinished`` (crashed or killed: resume it), where ``runs`` said running."""
    with open_checkpointer(str(store)) as saver, thread_lock(saver, "d-unfinished"):
        during = json.loads(invoke("show", "d-unfinished", "--json").stdout)
        text = invoke("show", "d-unfinished").stdout
    assert during["status"] == "running"
    assert "status       running" in text
    assert json.loads(invoke("show", "a-ok", "--json").stdout)["status"] == "ok"
