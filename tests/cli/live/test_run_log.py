"""The run log: one JSON line per node event, next to the store, with no secrets in it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gated_react.records.events import Tracker
from gated_react.records.run_log import FIELDS, RunLog, read_events

from ...support.cli import REFUND, invoke
from ...support.openai_server import FakeOpenAI, reply, tool_call


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_node_event_is_one_json_line(server: FakeOpenAI, state_dir: Path) -> None:
    server.push(*REFUND)
    out = invoke("run", "refund?", "--thread", "logged")
    assert out.exit_code == 0
    events = _lines(state_dir / "runs.sqlite.log")
    assert all(list(e)[: len(FIELDS)] == list(FIELDS) for e in events)
    assert {e["thread"] for e in events} == {"logged"}
    shown = [line.split()[1] for line in out.stdout.splitlines() if line[:3].strip().isdigit()]
    assert [e["node"] for e in events] == ["run", *shown]  # the same events the view showed
    gate = next(e for e in events if e["node"] == "gate")
    assert gate["decision"] == "allowed"
    assert gate["action"] == {"tool": "get_user_profile", "args": {"user_id": 42}}
    executed = next(e for e in events if e["node"] == "execute")
    assert "Anna" in str(executed["observation"])
    tokens = [int(str(e["tokens"])) for e in events]
    assert tokens == sorted(tokens)
    assert tokens[-1] == 72
    assert events[-1]["stop_reason"] == "success"
    assert [e["stop_reason"] for e in events[:-1]] == [None] * (len(events) - 1)


def test_a_stop_is_logged_with_its_reason(server: FakeOpenAI, state_dir: Path) -> None:
    server.push(tool_call("get_user_billing", user_id=42))
    invoke("run", "refund?", "--allow", "get_user_profile")
    events = _lines(state_dir / "runs.sqlite.log")
    assert [(e["node"], e["decision"]) for e in events[-2:]] == [
        ("gate", "stopped"),
        ("stop", "stopped"),
    ]
    assert events[-1]["stop_reason"] == "tool_denied:get_user_billing"


def test_no_secrets_reach_the_log_or_the_output(
    server: FakeOpenAI, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "local-secret-key-98765")
    goal = "use api_key=hunter2hunter2 and Authorization: Bearer abcdefgh12345678 please"
    server.push(reply("the key local-secret-key-98765 is sk-proj-0123456789abcdef"))
    out = invoke("run", goal)
    shown = invoke("show", out.stdout.split()[1], "--json").stdout
    text = (state_dir / "runs.sqlite.log").read_text() + out.stdout + out.stderr + shown
    for secret in (
        "local-secret-key-98765",
        "hunter2hunter2",
        "abcdefgh12345678",
        "0123456789abcdef",
    ):
        assert secret not in text
    assert "***" in text


def test_no_log_and_moved_log(server: FakeOpenAI, state_dir: Path, tmp_path: Path) -> None:
    server.push(reply("a"), reply("b"))
    assert invoke("run", "x", "--no-log").exit_code == 0
    assert not (state_dir / "runs.sqlite.log").exists()
    moved = tmp_path / "logs" / "run.jsonl"
    assert invoke("run", "x", "--log", str(moved)).exit_code == 0
    assert not (state_dir / "runs.sqlite.log").exists()
    assert [e["node"] for e in _lines(moved)] == ["run", "decide", "validate", "finish"]


def test_a_paused_run_logs_the_pause_and_the_resume(server: FakeOpenAI, state_dir: Path) -> None:
    server.push(tool_call("get_user_billing", user_id=42), reply("USD 49"))
    invoke("run", "x", "--thread", "p", "--approve-tool", "get_user_billing")
    invoke("resume", "p", "--approve-tool", "get_user_billing", "--approve")
    events = read_events(state_dir / "runs.sqlite.log", "p")
    decisions = [(e["node"], e["decision"]) for e in events]
    assert ("gate", "paused") in decisions
    assert ("run", "resumed") in decisions
    assert decisions.index(("gate", "paused")) < decisions.index(("run", "resumed"))
    resumed = events[decisions.index(("run", "resumed"))]
    assert resumed["action"] == {"answer": {"approved": True}}
    assert resumed["step"] == 1  # the counters continue from the stored run


def test_reading_skips_other_threads_and_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "runs.log"
    with RunLog(path) as log:
        log.write(Tracker("a").make("run", decision="started").record())
        log.write(Tracker("b").make("run", decision="started").record())
    with path.open("a") as handle:
        handle.write('{"thread": "a", "node": "dec')  # a crash mid-line
    assert [e["thread"] for e in read_events(path, "a")] == ["a"]
    assert read_events(tmp_path / "missing.log", "a") == []
    assert read_events(None, "a") == []


@pytest.mark.parametrize("kind", ["fifo", "fifo with a reader", "folder"])
def test_a_run_log_that_is_not_a_regular_file_is_refused_and_the_run_goes_on(
    server: FakeOpenAI, state_dir: Path, kind: str
) -> None:
    path = state_dir / "runs.sqlite.log"
    state_dir.mkdir(parents=True)
    reader = None
    if kind == "folder":
        path.mkdir()
    else:
        os.mkfifo(path)  # opened for writing alone, a FIFO blocks until someone reads it
    if kind == "fifo with a reader":
        reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        server.push(reply("done"))
        out = invoke("run", "x", "--thread", "piped")
    finally:
        if reader is not None:
            os.close(reader)
    assert out.exit_code == 0
    assert out.stderr.splitlines() == [
        f"gated-react: warning: the run log {path} is not a regular file; going on without it"
    ]
    assert "success" in out.stdout
    assert read_events(path, "piped") == []
