"""``gated-react queue``: the workers' jobs by thread, read from procrastinate's tables: queued,
running (which worker, since when), failed and retried."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gated_react.workers import enqueue_resume, enqueue_run, install_queue, make_app

from ...support.cli import invoke
from ...support.helpers import REFUND_GOAL
from ...support.worker_graphs import LOG_VAR, stall_once
from ...support.worker_procs import fleet, until

REFUND = "tests.support.worker_graphs:refund"


def _queue(url: str, *extra: str) -> dict[str, Any]:
    out = invoke("queue", "--db", url, "--json", *extra)
    assert out.exit_code == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _by_thread(listing: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {job["thread"]: job for job in listing["jobs"]}


@pytest.mark.postgres
def test_the_queue_shows_running_failed_and_retried_jobs(
    pg_url: str, tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_VAR, str(tmp_path / "decisions.tsv"))
    stall = stall_once(tmp_path, monkeypatch)
    install_queue(pg_url)
    app = make_app(pg_url)
    with fleet(pg_url, REFUND, 1, tmp_path, "--stalled-after", "1.5") as (doomed,):
        with app.open():  # no such thread: a defect, tried 3 times (2 and 4 s apart), failed
            enqueue_resume(app, "ghost")
            until(lambda: _queue(pg_url)["counts"] == {"failed": 1}, "the ghost job failed")
            enqueue_run(app, REFUND_GOAL, thread_id="held")  # hangs in decide, step 2
            enqueue_run(app, REFUND_GOAL, thread_id="later")  # waits behind it
        until(lambda: not stall.exists(), "the worker hangs")
        until(lambda: _by_thread(_queue(pg_url))["held"]["status"] == "running", "held runs")
        jobs = _by_thread(_queue(pg_url))
        table = invoke("queue", "--db", pg_url)
        doomed.proc.kill()
        doomed.proc.wait()
    ghost = jobs["ghost"]
    assert (ghost["status"], ghost["kind"], ghost["attempts"], ghost["retries"]) == (
        "failed",
        "resume",
        3,
        2,
    )
    held = jobs["held"]
    assert (held["status"], held["kind"], held["attempts"]) == ("running", "start", 0)
    assert held["worker_id"] == doomed.events("job_started")[-1]["worker_id"]
    assert held["started"] is not None
    assert jobs["later"]["status"] == "queued"
    assert table.exit_code == 0
    assert "running" in table.stdout
    assert f"{held['worker_id']} (beat " in table.stdout
    assert "1 failed, 1 queued, 1 running" in table.stdout
    (tmp_path / "second").mkdir()
    with fleet(pg_url, REFUND, 1, tmp_path / "second", "--stalled-after", "1.5"):
        until(lambda: _queue(pg_url)["counts"].get("succeeded") == 2, "both runs succeeded")
    after = _by_thread(_queue(pg_url))
    assert sorted(after) == ["ghost", "held"]  # "later" simply succeeded: left out
    assert (after["held"]["status"], after["held"]["retries"]) == ("succeeded", 1)
    assert sorted(_by_thread(_queue(pg_url, "--all"))) == ["ghost", "held", "later"]
    assert list(_by_thread(_queue(pg_url, "--thread", "held"))) == ["held"]
    assert "retried 1x" in invoke("queue", "--db", pg_url).stdout


def test_a_sqlite_store_has_no_queue(state_dir: Path, tmp_path: Path) -> None:
    out = invoke("queue", "--db", str(tmp_path / "runs.sqlite"))
    assert out.exit_code == 1
    assert out.stderr.count("\n") == 1
    assert "the workers' queue lives in a postgresql:// store" in out.stderr


@pytest.mark.postgres
def test_a_store_no_worker_ran_on_is_one_line(pg_url: str, state_dir: Path) -> None:
    out = invoke("queue", "--db", pg_url)
    assert out.exit_code == 1
    assert out.stderr.count("\n") == 1
    assert "no queue in this store" in out.stderr


@pytest.mark.postgres
def test_queued_jobs_are_listed_escaped_and_masked(pg_url: str, state_dir: Path) -> None:
    install_queue(pg_url)
    app = make_app(pg_url)
    hostile = "evil\x1b]0;pwned\x07\x1b[2J-sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    with app.open():
        enqueue_run(app, REFUND_GOAL, thread_id=hostile)
    table = invoke("queue", "--db", pg_url)
    assert table.exit_code == 0
    assert "queued" in table.stdout
    assert "\\x1b]0;pwned" in table.stdout  # shown as an escape, never sent raw
    for out in (table.stdout, invoke("queue", "--db", pg_url, "--json").stdout):
        assert "\x1b" not in out
        assert "\x07" not in out
        assert "abcdefghijklmnopqrstuvwxyz0123" not in out
    # Before: "1 queued in ...", as if the thread had the queue's job.
    other = invoke("queue", "--db", pg_url, "--thread", "nope").stdout.splitlines()
    assert other[0] == "no jobs of thread nope"
    assert other[1].startswith("1 queued in ")
