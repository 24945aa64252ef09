"""A live worker that the fleet took for dead comes back (``workers/heartbeat.py``).

A worker whose heartbeat ran late (a loaded machine, a store outage longer than
``--stalled-after``) is pruned by the next worker that starts. Here its row is deleted as
``prune_stalled_workers`` deletes it, while it runs a payment. It used to go on beating a row
that no longer existed, for ever invisible (the chaos test, on a loaded CI machine, waited 240 s
for its third live worker), and its own stalled-job sweep requeued the job it was running. Now
it registers again at its next beat and keeps its job, which ends once, on its first try.

A worker stopped long enough (SIGSTOP, a frozen machine) does lose its job to another worker:
the tries that meet its lock are ``busy`` and its own try, going on later, is ``taken_over``;
neither is a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from gated_react.store.locks import ThreadBusy
from gated_react.workers import enqueue_run, install_queue, make_app
from gated_react.workers.heartbeat import failed_as
from gated_react.workers.supervisor import worker_command

from ..support.fleet import registered
from ..support.helpers import REFUND_GOAL
from ..support.openai_server import Delay, FakeOpenAI
from ..support.procs import WAIT, wait_until
from ..support.worker_graphs import (
    LOG_VAR,
    MODEL_URL_VAR,
    PAYMENTS_VAR,
    hold_once,
    pay_reply,
    release,
    taken_by,
)
from ..support.worker_procs import Worker, fleet, until
from ..test_workers import jobs, stored

STALLED_AFTER = 1.5
LATENCY = 1.0  # per model call: the job lasts three of them, several heartbeats


def rows(url: str) -> list[tuple[int, bool]]:
    return registered(url, STALLED_AFTER)


def lines(log: Path, event: str) -> list[dict[str, object]]:
    found = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return [line for line in found if line["event"] == event]


@pytest.mark.postgres
def test_a_pruned_worker_registers_again_and_keeps_its_job(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = tmp_path / "payments.tsv"
    monkeypatch.setenv(PAYMENTS_VAR, str(payments))
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        enqueue_run(app, "Pay order 7", thread_id="held")
    command = worker_command(
        pg_url, "tests.support.worker_graphs:pays", stalled_after=STALLED_AFTER
    )
    log = tmp_path / "worker.log"
    with FakeOpenAI(default=lambda request: Delay(LATENCY, pay_reply(request))) as server:
        monkeypatch.setenv(MODEL_URL_VAR, server.base_url)
        with log.open("wb") as err:
            worker = subprocess.Popen(command, stderr=err)
        try:
            wait_until(lambda: jobs(pg_url) == [("held", "doing", 0)])
            (first,) = rows(pg_url)
            with psycopg.connect(pg_url, autocommit=True) as conn:  # what a starting worker does
                conn.execute("DELETE FROM procrastinate_workers")
            wait_until(lambda: jobs(pg_url) == [("held", "succeeded", 1)])  # a first try
            wait_until(lambda: [fresh for _, fresh in rows(pg_url)] == [True])
            (again,) = rows(pg_url)
            worker.terminate()
            assert worker.wait(WAIT) == 0
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(WAIT)
    assert again[0] != first[0]
    (said,) = lines(log, "registered_again")
    assert (said["was"], said["worker_id"]) == (first[0], again[0])
    assert (said["jobs_kept"], said["jobs_requeued"]) == (1, 0)
    assert stored(pg_url, "held")["stop_reason"] == "success"
    assert len(payments.read_text().splitlines()) == 1  # paid once
    assert rows(pg_url) == []  # it unregistered its new row as it stopped


@pytest.mark.postgres
def test_a_pruned_worker_takes_its_next_job_without_dying(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruned between two beats (10 s apart at ``--stalled-after 30``), the worker's next
    fetch names a row that no longer exists: the jobs' foreign key refuses it, and the worker
    died of it (a supervisor replaces it, cutting its other jobs short). It registers again
    there too, and takes the job on its first try."""
    payments = tmp_path / "payments.tsv"
    monkeypatch.setenv(PAYMENTS_VAR, str(payments))
    install_queue(pg_url)
    command = worker_command(pg_url, "tests.support.worker_graphs:pays", stalled_after=30)
    log = tmp_path / "worker.log"
    with FakeOpenAI(default=lambda request: Delay(0.05, pay_reply(request))) as server:
        monkeypatch.setenv(MODEL_URL_VAR, server.base_url)
        with log.open("wb") as err:
            worker = subprocess.Popen(command, stderr=err)
        try:
            wait_until(lambda: len(registered(pg_url, 30)) == 1)
            (first,) = registered(pg_url, 30)
            with psycopg.connect(pg_url, autocommit=True) as conn:  # what a starting worker does
                conn.execute("DELETE FROM procrastinate_workers")
            app = make_app(pg_url)
            with app.open():
                enqueue_run(app, "Pay order 7", thread_id="next")
            wait_until(lambda: jobs(pg_url) == [("next", "succeeded", 1)])
            alive = worker.poll() is None
            (again,) = registered(pg_url, 30)
            worker.terminate()
            worker.wait(WAIT)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(WAIT)
    assert alive, log.read_text()[-2000:]
    assert again[0] != first[0]
    assert len(lines(log, "registered_again")) == 1
    assert len(payments.read_text().splitlines()) == 1


class _Connector:
    """The job's row as the store holds it (None: gone), or the store lost."""

    def __init__(self, row: dict[str, Any] | Exception | None) -> None:
        self.row = row

    async def execute_query_one_async(self, query: str, **params: Any) -> Any:
        if isinstance(self.row, Exception):
            raise self.row
        return self.row


def _failed_as(exc: BaseException, row: dict[str, Any] | Exception | None) -> str:
    app = SimpleNamespace(connector=_Connector(row))
    job = SimpleNamespace(id=7, attempts=1)  # this try began as the job's second
    return asyncio.run(failed_as(app, job, exc))  # type: ignore[arg-type]


def test_a_try_that_met_a_held_thread_is_busy_not_failed() -> None:
    assert _failed_as(ThreadBusy("t"), {"attempts": 1}) == "busy"


def test_a_try_whose_job_was_requeued_since_it_began_was_taken_over() -> None:
    lost = psycopg.OperationalError("the connection is closed")
    assert _failed_as(lost, {"attempts": 2}) == "taken_over"
    assert _failed_as(RuntimeError("a defect"), {"attempts": 3}) == "taken_over"


def test_any_other_raise_is_a_failure() -> None:
    lost = psycopg.OperationalError("the connection is closed")
    assert _failed_as(lost, {"attempts": 1}) == "failed"  # still this try's job
    assert _failed_as(lost, psycopg.OperationalError("server down")) == "failed"  # unknown
    assert _failed_as(RuntimeError("a defect"), None) == "failed"


REFUND = "tests.support.worker_graphs:refund"


def _outcomes(worker: Worker) -> list[str]:
    return [str(line["outcome"]) for line in worker.events("job_ended")]


def _drop_the_lock_holder(url: str) -> int:
    """Close the session that holds the thread lock, as a server or a network drops the
    connections of a process stopped too long; how many were closed."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory'"
            " AND granted AND database = (SELECT oid FROM pg_database"
            " WHERE datname = current_database())"
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.postgres
def test_a_stopped_worker_loses_its_job_and_nothing_counts_as_failed(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker stopped (SIGSTOP) in the middle of a run: after ``--stalled-after`` another
    worker takes its job over and finds the thread locked by the stopped one's session
    (``busy``: tried again). Once that session is dropped the run goes on there to its end.
    The stopped worker, let go on, fails at its next write and gives the job up
    (``taken_over``). Before, every busy try was a failed line and a failed count, and the
    stopped try a failed job, a ``connection_lost`` line and an error no one handled (its retry
    of a job that had succeeded)."""
    decisions = tmp_path / "decisions.tsv"
    monkeypatch.setenv(LOG_VAR, str(decisions))
    hold = hold_once(tmp_path, monkeypatch)
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        enqueue_run(app, REFUND_GOAL, thread_id="stalled")
    options = ("--stalled-after", str(STALLED_AFTER))
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    with fleet(pg_url, REFUND, 1, tmp_path / "first", *options) as (first,):
        until(lambda: taken_by(hold) is not None, "the first worker is in the run")
        os.kill(first.proc.pid, signal.SIGSTOP)
        try:
            with fleet(pg_url, REFUND, 1, tmp_path / "second", *options) as (second,):
                until(lambda: "busy" in _outcomes(second), "the second worker met the lock")
                dropped = _drop_the_lock_holder(pg_url)
                until(lambda: "ended" in _outcomes(second), "the second worker ended the run")
                counted = {
                    name: second.metric(f"gated_react_jobs_{name}_total")
                    for name in ("failed", "busy")
                }
        finally:
            os.kill(first.proc.pid, signal.SIGCONT)
        release(hold)
        until(lambda: bool(_outcomes(first)), "the first worker's try ended")
        failed, taken = (
            first.metric(f"gated_react_jobs_{name}_total") for name in ("failed", "taken_over")
        )
    assert dropped == 1
    assert set(_outcomes(second)) == {"busy", "ended"}
    assert counted["failed"] == 0
    assert counted["busy"] == _outcomes(second).count("busy")
    (given_up,) = first.events("job_ended")
    assert given_up["outcome"] == "taken_over"
    assert (failed, taken) == (0, 1)
    assert first.events("connection_lost") == []
    assert [line for line in first.events("log") if line["level"] == "ERROR"] == []
    assert jobs(pg_url) == [("stalled", "succeeded", jobs(pg_url)[0][2])]
    assert stored(pg_url, "stalled")["stop_reason"] == "success"
    (finished,) = decisions.read_text().splitlines()  # the run ended once, by the second
    assert finished.split("\t")[0] == str(second.proc.pid)
