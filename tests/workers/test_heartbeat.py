"""A live worker that the fleet took for dead comes back (``workers/heartbeat.py``).

A worker whose heartbeat ran late (a loaded machine, a store outage longer than
``--stalled-after``) is pruned by the next worker that starts. Here its row is deleted as
``prune_stalled_workers`` deletes it, while it runs a payment. It used to go on beating a row
that no longer existed, for ever invisible (the chaos test, on a loaded CI machine, waited 240 s
for its third live worker), and its own stalled-job sweep requeued the job it was running. Now
it registers again at its next beat and keeps its job, which ends once, on its first try.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psycopg
import pytest

from gated_react.workers import enqueue_run, install_queue, make_app
from gated_react.workers.supervisor import worker_command

from ..support.fleet import registered
from ..support.openai_server import Delay, FakeOpenAI
from ..support.procs import WAIT, wait_until
from ..support.worker_graphs import MODEL_URL_VAR, PAYMENTS_VAR, pay_reply
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
