"""Workers outlive their connections: every client backend of the workers' database terminated
twice during a batch (``pg_terminate_backend``, as a failover or an operator does), and every run
still ends once, no payment is made twice and no job fails. The restart of a whole server is in
the chaos test (tests/reliability/test_fleet_chaos.py), which needs a cluster of its own; this one
runs on the shared test server, so it terminates the backends of its own database only."""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from gated_react import UnsafeCheckpoint, open_checkpointer, read, run
from gated_react.store.key import TAG
from gated_react.workers import (
    enqueue_resume,
    enqueue_run,
    install_queue,
    make_app,
    start_workers,
)

from ..support.fleet import terminate_clients
from ..support.helpers import REFUND_GOAL
from ..support.openai_server import Delay, FakeOpenAI
from ..support.procs import WAIT, wait_until
from ..support.scenarios import graph_for
from ..support.tamper import copy_rows, poison, touch
from ..support.worker_graphs import LOG_VAR, MODEL_URL_VAR, PAYMENTS_VAR, pay_reply
from ..test_workers import jobs, stored

RUNS = 16


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    with FakeOpenAI(default=lambda request: Delay(0.3, pay_reply(request))) as server:
        monkeypatch.setenv(MODEL_URL_VAR, server.base_url)
        monkeypatch.setenv(PAYMENTS_VAR, str(tmp_path / "payments.tsv"))
        yield tmp_path / "payments.tsv"


def succeeded(url: str) -> int:
    return sum(1 for _, status, _ in jobs(url) if status == "succeeded")


@pytest.mark.postgres
def test_workers_survive_every_connection_being_terminated(pg_url: str, model: Path) -> None:
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        threads = [enqueue_run(app, f"Pay order {n}", thread_id=f"order-{n}") for n in range(RUNS)]
    procs = start_workers(pg_url, "tests.support.worker_graphs:pays", 2, concurrency=4)
    try:
        terminated = []
        for done in (RUNS // 4, RUNS // 2):
            wait_until(lambda done=done: succeeded(pg_url) >= done)
            terminated.append(terminate_clients(pg_url, this_database_only=True))
        wait_until(lambda: succeeded(pg_url) == RUNS)
        assert all(proc.poll() is None for proc in procs)  # the workers never exited for it
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(WAIT)
    # The workers' connections were there to terminate: the first cut finds both workers'
    # pools; the second, on a loaded machine, may find them holding one connection between
    # jobs (a pool reconnects on demand), and one is enough for the fault.
    assert terminated[0] >= 2
    assert terminated[1] >= 1
    assert [status for _, status, _ in jobs(pg_url)] == ["succeeded"] * RUNS
    ended = {thread: stored(pg_url, thread)["stop_reason"] for thread in threads}
    # Neither tool is idempotent: a run whose connections went while one of them was between
    # its recorded call and its recorded result stops rather than call it again, whichever.
    unknown = {"tool_outcome_unknown:look_up_order", "tool_outcome_unknown:pay"}
    assert set(ended.values()) <= {"success", *unknown}
    paid = Counter(line.split("\t")[0] for line in model.read_text().splitlines())
    assert max(paid.values()) == 1
    assert paid.keys() >= {t.removeprefix("order-") for t, why in ended.items() if why == "success"}


@pytest.mark.postgres
def test_a_worker_reads_through_the_guarded_serializer(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint edited to name ``os.system`` is refused by a worker's runs as by the CLI:
    nothing runs, the job is retried as a defect and fails, the thread is left as it was."""
    monkeypatch.setenv(LOG_VAR, str(tmp_path / "decisions.tsv"))
    with open_checkpointer(pg_url) as saver:
        run(graph_for({}, saver), REFUND_GOAL, thread_id="edited")
        poison(saver, "edited", {"answer": touch(tmp_path / "ran")})
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        enqueue_resume(app, "edited")
    (proc,) = start_workers(pg_url, "tests.support.worker_graphs:refund", 1)
    try:
        wait_until(lambda: jobs(pg_url)[0][2] >= 1)  # tried once, refused, retried later
    finally:
        proc.terminate()
        proc.wait(WAIT)
    assert not (tmp_path / "ran").exists()


@pytest.mark.postgres
def test_a_workers_runs_are_signed_and_a_copied_thread_is_refused(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GATED_REACT_STORE_KEY`` reaches the workers: the rows a job writes (on its own pooled
    connection) are signed, and a thread copied under another id is refused like a damaged
    one (the job fails, nothing runs)."""
    key = "worker-store-key-" + "w" * 20
    monkeypatch.setenv(LOG_VAR, str(tmp_path / "decisions.tsv"))
    monkeypatch.setenv("GATED_REACT_STORE_KEY", key)
    with open_checkpointer(pg_url, key=key) as saver:
        run(graph_for({}, saver), REFUND_GOAL, thread_id="mine")
    copy_rows(pg_url, "mine", "copied", upto="z", writes_before=False)
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        enqueue_run(app, REFUND_GOAL, thread_id="fresh")
        enqueue_resume(app, "copied")
    (proc,) = start_workers(pg_url, "tests.support.worker_graphs:refund", 1)
    try:
        wait_until(lambda: jobs(pg_url)[0][1] == "succeeded")
        wait_until(lambda: jobs(pg_url)[1][2] >= 1)  # tried once, refused
    finally:
        proc.terminate()
        proc.wait(WAIT)
    with open_checkpointer(pg_url, key=key) as saver:
        assert read(graph_for({}, saver), "fresh")["stop_reason"] == "success"
        with pytest.raises(UnsafeCheckpoint, match="'copied' does not match its signature"):
            read(graph_for({}, saver), "copied")
        raw = saver.inner
        latest = raw.get_tuple({"configurable": {"thread_id": "fresh", "checkpoint_ns": ""}})
        assert TAG in latest.metadata
