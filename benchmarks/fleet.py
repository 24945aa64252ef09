"""8. A fleet on Postgres: runs/s of 1/2/3 worker processes x concurrency 1/8/32 (issue 22).

A private cluster (``scripts/pg-cluster``), a scripted OpenAI-compatible server answering every
request in 0.5 s, and the pay runs of the chaos test (look an order up, pay it, answer: three
model calls, so 1.5 s of model time per run) through the real ``ChatOpenAI``. For each fleet the
queue gets ``WAVES`` runs per slot (workers x concurrency), the ``-n W --concurrency K --burst``
supervisor drains it, and runs/s counts from the first job started to the last job done
(procrastinate's own events: process start-up is left out), against the ideal W x K / 1.5 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LATENCY = 0.5
CALLS_PER_RUN = 3
WAVES = 3
FLEETS = [(w, k) for w in (1, 2, 3) for k in (1, 8, 32)]
QUICK_FLEETS = [(1, 1), (1, 8), (2, 8)]


@contextmanager
def _database(server: str) -> Iterator[str]:
    import psycopg
    from tests.support.pg import with_database

    name = f"fleet_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield with_database(server, name)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _busy(url: str) -> tuple[float, list[float], dict[str, int]]:
    """Seconds from the first job started to the last job done, each job's seconds, statuses."""
    import psycopg

    with psycopg.connect(url) as conn:
        span = conn.execute(
            "SELECT extract(epoch FROM max(at) - min(at)) FROM procrastinate_events"
            " WHERE type IN ('started', 'succeeded')"
        ).fetchone()
        each = conn.execute(
            "SELECT extract(epoch FROM max(at) - min(at)) FROM procrastinate_events"
            " WHERE type IN ('started', 'succeeded') GROUP BY job_id"
        ).fetchall()
        statuses = conn.execute(
            "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status"
        ).fetchall()
    seconds = float(span[0]) if span and span[0] is not None else float("nan")
    return seconds, [float(row[0]) for row in each], {str(s): int(n) for s, n in statuses}


def _one(server: str, workers: int, concurrency: int, env: dict[str, str]) -> dict[str, Any]:
    from gated_react.workers import enqueue_run, install_queue, make_app

    runs = workers * concurrency * WAVES
    with _database(server) as url:
        install_queue(url)
        app = make_app(url)
        with app.open():
            for n in range(runs):
                enqueue_run(app, f"Pay order {n}", thread_id=f"order-{n}")
        command = [sys.executable, "-m", "gated_react.workers", "--store", url, "--burst"]
        command += ["--graph", "tests.support.worker_graphs:pays", "-n", str(workers)]
        command += ["--concurrency", str(concurrency), "--stalled-after", "60"]
        code = subprocess.run(command, env=env, check=False, timeout=1800).returncode
        seconds, each, statuses = _busy(url)
    ideal = workers * concurrency / (CALLS_PER_RUN * LATENCY)
    measured = runs / seconds
    return {
        "workers": workers,
        "concurrency": concurrency,
        "runs": runs,
        "exit_code": code,
        "jobs": statuses,
        "seconds": round(seconds, 2),
        "runs_per_s": round(measured, 2),
        "ideal_runs_per_s": round(ideal, 2),
        "of_ideal": round(measured / ideal, 2),
        "seconds_per_run_median": round(statistics.median(each), 2),
    }


def measure(quick: bool) -> dict[str, Any]:
    import os

    from tests.support.fleet import private_cluster
    from tests.support.openai_server import Delay, FakeOpenAI
    from tests.support.worker_graphs import MODEL_URL_VAR, PAYMENTS_VAR, pay_reply

    load = [os.getloadavg()[0]]
    rows = []
    with (
        private_cluster() as (server, folder),
        FakeOpenAI(default=lambda request: Delay(LATENCY, pay_reply(request))) as model,
    ):
        env = {**os.environ, MODEL_URL_VAR: model.base_url}
        env[PAYMENTS_VAR] = str(Path(folder) / "payments.tsv")
        for workers, concurrency in QUICK_FLEETS if quick else FLEETS:
            print(f"  fleet {workers} x {concurrency} ...", file=sys.stderr, flush=True)
            rows.append(_one(server, workers, concurrency, env))
            load.append(os.getloadavg()[0])
    return {
        "latency_s": LATENCY,
        "model_calls_per_run": CALLS_PER_RUN,
        "waves": WAVES,
        "load_average": [min(load), max(load)],
        "rows": rows,
    }
