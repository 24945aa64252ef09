"""Real workers tell the operator what they do: a log line at each job's start and end, the
run log of every run they advance (in the store, or in a folder the operator names) that
``gated-react show`` reads, and counters an orchestrator scrapes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gated_react.records.run_log import FIELDS
from gated_react.workers import enqueue_resume, enqueue_run, install_queue, make_app

from ..support.cli import invoke
from ..support.helpers import REFUND_GOAL
from ..support.worker_graphs import LOG_VAR
from ..support.worker_procs import Worker, fleet, until

REFUND = "tests.support.worker_graphs:refund"
RUNS = 6


@pytest.fixture(autouse=True)
def decisions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "decisions.tsv"
    monkeypatch.setenv(LOG_VAR, str(path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))  # the CLI's own log: empty
    return path


def _statuses(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT status::text FROM procrastinate_jobs ORDER BY id").fetchall()
    return [str(row[0]) for row in rows]


def _queue(url: str, *threads: str) -> None:
    install_queue(url)
    app = make_app(url)
    with app.open():
        for thread in threads:
            enqueue_run(app, f"{REFUND_GOAL} ({thread})", thread_id=thread)


def _ends(workers: list[Worker]) -> list[dict[str, Any]]:
    return [line for worker in workers for line in worker.events("job_ended")]


@pytest.mark.postgres
def test_each_job_is_a_start_and_an_end_line_and_its_run_log_is_in_the_store(
    pg_url: str, tmp_path: Path
) -> None:
    threads = [f"seen-{n}" for n in range(RUNS)]
    _queue(pg_url, *threads)
    with fleet(pg_url, REFUND, 2, tmp_path) as workers:
        until(lambda: len(_ends(workers)) == RUNS, "every job ended")
        until(lambda: _statuses(pg_url) == ["succeeded"] * RUNS, "every job succeeded")
        done = sum(w.metric("gated_react_jobs_done_total", outcome="ended") for w in workers)
        in_flight = sum(w.metric("gated_react_jobs_in_flight") for w in workers)
        starts = [line for worker in workers for line in worker.events("job_started")]
    assert done == RUNS
    assert in_flight == 0
    assert sorted(line["thread"] for line in starts) == threads
    ends = _ends(workers)
    assert sorted(line["thread"] for line in ends) == threads
    for line in ends:
        assert (line["outcome"], line["stop_reason"], line["attempt"]) == ("ended", "success", 1)
        assert line["tokens"] > 0
        assert line["seconds"] >= 0
        assert isinstance(line["worker_id"], int)
        assert line["worker"] in {"worker-0", "worker-1"}
    shown = invoke("show", threads[0], "--db", pg_url, "--json")
    assert shown.exit_code == 0, shown.stderr
    events = json.loads(shown.stdout)["events"]
    assert [list(event)[: len(FIELDS)] for event in events] == [list(FIELDS)] * len(events)
    assert (events[0]["node"], events[0]["decision"]) == ("run", "started")
    assert events[-1]["node"] == "finish"
    assert events[-1]["stop_reason"] == "success"
    nodes = Counter(event["node"] for event in events)
    assert nodes["decide"] == 4  # three tool steps and the answer, each logged once
    # every node, as the CLI logs them (the steps they hand on are streamed too)
    assert (nodes["validate"], nodes["gate"], nodes["execute"], nodes["observe"]) == (4, 3, 3, 3)
    gates = [(e["decision"], e["action"]) for e in events if e["node"] == "gate"]
    assert gates[0] == ("allowed", {"tool": "get_user_profile", "args": {"user_id": 42}})
    # each line counts what the run's record holds by then, as the CLI's do
    assert (events[-1]["step"], events[-1]["tool_calls"]) == (4, 3)
    ended = next(line for line in ends if line["thread"] == threads[0])
    assert events[-1]["tokens"] == ended["tokens"]
    tokens = [event["tokens"] for event in events]
    assert tokens == sorted(tokens)
    decided = [event for event in events if event["node"] == "decide"]
    assert decided[0]["context"]["model"] == "scripted"
    assert [event for event in events if "context" in event] == decided[:1]
    table = invoke("show", threads[0], "--db", pg_url)
    assert "run log" in table.stdout


@pytest.mark.postgres
def test_a_run_log_dir_gets_the_same_file_the_cli_writes(pg_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    _queue(pg_url, "to-file")
    with fleet(pg_url, REFUND, 1, tmp_path, "--run-log-dir", str(folder)) as workers:
        until(lambda: len(_ends(workers)) == 1, "the job ended")
    lines = [json.loads(line) for line in (folder / "runs.log").read_text().splitlines()]
    assert {line["thread"] for line in lines} == {"to-file"}
    assert lines[-1]["stop_reason"] == "success"
    assert workers[0].events("worker_started")[0]["run_log"] == str(folder / "runs.log")
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT count(*) FROM gated_react_run_log").fetchone()
    assert row is not None
    assert row[0] == 0
    without = json.loads(invoke("show", "to-file", "--db", pg_url, "--json").stdout)
    assert without["events"] == []
    shown = invoke("show", "to-file", "--db", pg_url, "--log", str(folder / "runs.log"), "--json")
    assert json.loads(shown.stdout)["events"] == lines


@pytest.mark.postgres
def test_a_failing_job_is_a_failed_line_and_a_failed_count(pg_url: str, tmp_path: Path) -> None:
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        enqueue_resume(app, "no-such-thread")
    with fleet(pg_url, REFUND, 1, tmp_path) as workers:
        until(lambda: len(_ends(workers)) == 1, "the job ended")
        failed = workers[0].metric("gated_react_jobs_failed_total")
    (line,) = _ends(workers)
    assert line["outcome"] == "failed"
    assert line["error"].startswith("UnknownThread: ")
    assert "stop_reason" not in line
    assert failed == 1
