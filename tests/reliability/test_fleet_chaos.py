"""Chaos: a fleet of 3 workers pays a batch of orders while its infrastructure fails under it.

A private Postgres cluster, a scripted OpenAI-compatible server answering in 0.5 s, the ``-n 3``
supervisor, runs that look an order up and then ``pay`` it (not idempotent). During the batch:
a SIGKILL of one worker, a Postgres restart (fast shutdown, down for a while), and a
``pg_terminate_backend`` of every client. Then every run has ended (paid, or stopped with
``tool_outcome_unknown`` where the kill left a payment's outcome unknown), no order was paid
twice, no job failed, and the supervisor runs 3 live workers again.

CI runs ``GATED_REACT_CHAOS_RUNS`` (default 24) with the store down 2 s; the full size is
``GATED_REACT_CHAOS_RUNS=90 GATED_REACT_CHAOS_DOWN=60 pytest -m slow tests/reliability``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gated_react import open_checkpointer, read
from gated_react.workers import enqueue_run, install_queue, make_app

from ..support.fleet import (
    Fleet,
    private_cluster,
    registered,
    restart_cluster,
    terminate_clients,
)
from ..support.openai_server import Delay, FakeOpenAI
from ..support.procs import polls, wait_until
from ..support.scenarios import graph_for
from ..support.worker_graphs import MODEL_URL_VAR, PAYMENTS_VAR, pay_reply

RUNS = int(os.environ.get("GATED_REACT_CHAOS_RUNS", "24"))
DOWN = float(os.environ.get("GATED_REACT_CHAOS_DOWN", "2"))
LATENCY = 0.5
STALLED_AFTER = 4.0
ENDED = {"success", "tool_outcome_unknown"}

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster() -> Iterator[tuple[str, Path]]:
    with private_cluster() as found:
        yield found


@pytest.fixture
def model_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=lambda request: Delay(LATENCY, pay_reply(request))) as server:
        yield server


def finished(url: str) -> int:
    """Jobs that ended, read on a fresh connection (the store may have just restarted)."""
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
            ).fetchone()
    except psycopg.OperationalError:
        return 0
    return int(row[0]) if row else 0


def progressed(url: str, runs: int) -> None:
    """Until ``runs`` more jobs have ended: the fleet works again after the last fault."""
    before = finished(url)
    wait_until(lambda: finished(url) >= min(RUNS, before + runs))


def job_statuses(url: str) -> tuple[Counter[str], int]:
    """Jobs per status, and how many times they were retried in all."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT status::text, attempts FROM procrastinate_jobs").fetchall()
    return Counter(str(status) for status, _ in rows), sum(int(tries) for _, tries in rows)


def live_workers(url: str) -> int:
    """Workers whose heartbeat is fresh."""
    return sum(fresh for _, fresh in registered(url, STALLED_AFTER))


def outcomes(url: str, threads: list[str]) -> dict[str, dict[str, Any]]:
    with open_checkpointer(url) as saver:
        graph = graph_for({}, saver)
        return {thread: read(graph, thread) for thread in threads}


def test_a_fleet_survives_a_kill_a_store_restart_and_dropped_connections(
    cluster: tuple[str, Path],
    model_server: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, folder = cluster
    payments = tmp_path / "payments.tsv"
    monkeypatch.setenv(MODEL_URL_VAR, model_server.base_url)
    monkeypatch.setenv(PAYMENTS_VAR, str(payments))
    install_queue(url)
    app = make_app(url)
    with app.open():
        threads = [enqueue_run(app, f"Pay order {n}", thread_id=f"order-{n}") for n in range(RUNS)]
    options = ["-n", "3", "--concurrency", "4", "--stalled-after", str(STALLED_AFTER)]
    fleet = Fleet(url, "tests.support.worker_graphs:pays", tmp_path / "fleet.log", *options)
    try:
        started = time.monotonic()
        fleet.wait_for_workers(3)
        step = max(1, RUNS // 6)  # runs that finish before each fault, and after the last
        wait_until(lambda: finished(url) >= step)
        killed = fleet.kill_one()
        progressed(url, step)
        restart_cluster(folder, DOWN)
        progressed(url, step)
        dropped = terminate_clients(url)
        wait_until(lambda: finished(url) >= RUNS)
        elapsed = time.monotonic() - started
        ended = outcomes(url, threads)
        _until_three_live(fleet, url)
        statuses, retries = job_statuses(url)
        code = fleet.stop()
    finally:
        fleet.close()
    paid = Counter(line.split("\t")[0] for line in payments.read_text().splitlines())
    reasons = Counter(str(out["stop_reason"]).split(":")[0] for out in ended.values())
    unknown = [t for t, out in ended.items() if out["stop_reason"] != "success"]
    unpaid = [t for t in unknown if not paid[t.removeprefix("order-")]]
    print(
        f"\nchaos: {RUNS} runs, 1 worker killed (pid {killed}), 1 store restart ({DOWN:g} s down),"
        f" {dropped} connections terminated; outcomes {dict(reasons)} ({len(unpaid)} of the"
        f" unknown not paid); jobs {dict(statuses)}, {retries} retries;"
        f" {RUNS / elapsed:.2f} runs/s ({elapsed:.1f} s)"
    )
    assert set(reasons) <= ENDED, reasons
    assert max(paid.values()) == 1  # no order paid twice
    for thread, out in ended.items():  # a paid run paid once; an unknown outcome at most once
        order = thread.removeprefix("order-")
        assert paid[order] == (1 if out["stop_reason"] == "success" else paid[order])
    assert statuses == Counter({"succeeded": RUNS})  # no job failed, none left behind
    log = fleet.stderr()
    assert f"(pid {killed}) died of SIGKILL; replacing it" in log
    _a_line_per_job(log, ended, killed)
    assert code == 128 + 9  # a worker died of a signal: the supervisor says so


LIVE_AGAIN = 90.0
"""Seconds the fleet has to show 3 live workers once the batch is done: inside pytest's
timeout, so a failure says what was seen instead of being cut short."""


def _until_three_live(fleet: Fleet, url: str) -> None:
    """Until the supervisor runs 3 workers again, each with a fresh heartbeat; if not, what
    was seen (processes, registered rows) and the fleet's last lines say why."""
    deadline = time.monotonic() + LIVE_AGAIN
    for pause in polls():
        if len(fleet.workers()) == 3 and live_workers(url) == 3:
            return
        if time.monotonic() > deadline:
            break
        time.sleep(pause)
    seen = f"worker processes {fleet.workers()}, rows (id, fresh) {registered(url, STALLED_AFTER)}"
    log = fleet.stderr()[-8000:]
    raise AssertionError(
        f"not 3 live after {LIVE_AGAIN:g} s: {seen}; the log ends:\n{log}\n{_stacks(fleet)}"
    )


def _stacks(fleet: Fleet) -> str:
    """Where each worker waits: its threads' and tasks' stacks (``kill -USR1``), as written,
    one worker at a time under its pid (signalled together, their dumps interleave)."""
    dumps = []
    for pid in fleet.workers():
        before = len(fleet.stderr())
        os.kill(pid, signal.SIGUSR1)
        with contextlib.suppress(AssertionError):  # a loop blocked for good writes no tasks
            wait_until(lambda at=before: "asyncio tasks:" in fleet.stderr()[at:])
        dumps.append(f"worker pid {pid}:\n{fleet.stderr()[before:][-12000:]}")
    return "the workers' stacks:\n" + "\n".join(dumps)


def _a_line_per_job(log: str, ended: dict[str, dict[str, Any]], killed: int) -> None:
    """Every job has its start line and, unless the killed worker held it, its end line; every
    run's last job says how it ended; the faults are in the lines too."""
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    events = Counter(line["event"] for line in lines)
    tries = Counter(
        (ln["pid"], ln["job"], ln["attempt"]) for ln in lines if ln["event"] == "job_started"
    )
    done = Counter(
        (ln["pid"], ln["job"], ln["attempt"]) for ln in lines if ln["event"] == "job_ended"
    )
    assert done - tries == Counter()  # no end without its start
    assert {pid for pid, _, _ in tries - done} <= {killed}  # only the SIGKILL cut jobs short
    last = {
        ln["thread"]: ln for ln in lines if ln["event"] == "job_ended" and ln["outcome"] == "ended"
    }
    assert {thread: line["stop_reason"] for thread, line in last.items()} == {
        thread: out["stop_reason"] for thread, out in ended.items()
    }
    assert events["connection_lost"] >= 1
    assert events["reconnected"] >= 1
