"""A worker's liveness and numbers, for an orchestrator and for Prometheus, over HTTP.

``GET /healthz``  200 while the worker's event loop turns (it beats every second), else 503:
                  a worker stuck in a blocking call is dead to its jobs; restart it.
``GET /readyz``   200 when alive, no connection is lost (``worker_log.connection_lost``
                  until ``reconnected``) and the store answers a query now (``PROBE_SECONDS``;
                  an idle worker's connections are found closed only when next used), else
                  503: the worker waits for its store.
``GET /metrics``  Prometheus text: jobs done (by outcome), failed, busy, taken over, retried,
                  in flight; runs
                  ended (by stop reason), model tokens, cost and call latency, tool calls
                  (by outcome); the store's questions waiting and queue, read at each scrape
                  (``metrics``).

The server (``health_server``) runs on a thread and event loop of its own, so a busy or blocked
worker loop still answers (with 503), and clients that open connections and send nothing never
keep a probe out.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from gated_react.store.postgres import unreachable
from gated_react.workers import log as worker_log
from gated_react.workers.health_server import (
    IDLE_SECONDS,
    MAX_CONNECTIONS,
    Answer,
    HealthServer,
)
from gated_react.workers.metrics import RunMetrics, StoreBacklog

BEAT_SECONDS = 1.0
"""How often the worker's loop says it is alive."""
PROBE_SECONDS = 3.0
"""How long ``/readyz`` waits for the store to answer."""


class Health:
    """One worker process's liveness and job counters (its own Prometheus registry)."""

    def __init__(
        self, worker: str, *, stalled_after: float = 30.0, store: str | None = None
    ) -> None:
        """``store``: the Postgres connection string whose backlog each scrape reads."""
        self.worker = worker
        self.stalled_after = stalled_after
        self.registry = CollectorRegistry()
        self.runs = RunMetrics(self.registry)
        self.store = store
        if store is not None:
            self.registry.register(StoreBacklog(store))
        self.done = Counter(
            "gated_react_jobs_done",
            "Jobs whose run ended (outcome=ended) or now waits for a human (outcome=waiting)",
            ["outcome"],
            registry=self.registry,
        )
        self.failed = Counter(
            "gated_react_jobs_failed",
            "Jobs that raised (the queue may retry them)",
            registry=self.registry,
        )
        self.busy = Counter(
            "gated_react_jobs_busy",
            "Jobs whose thread another try held (a stalled worker's): tried again, not failed",
            registry=self.registry,
        )
        self.taken_over = Counter(
            "gated_react_jobs_taken_over",
            "Jobs this worker stalled on and another worker took over: given up, not failed",
            registry=self.registry,
        )
        self.retried = Counter(
            "gated_react_jobs_retried",
            "Jobs started again after an earlier attempt",
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "gated_react_jobs_in_flight", "Jobs this worker runs now", registry=self.registry
        )
        self._beat = time.monotonic()
        self._running = 0

    def job_started(self, attempt: int) -> None:
        """A job was taken (``attempt`` 1 for its first try)."""
        self._running += 1
        self.in_flight.set(self._running)
        if attempt > 1:
            self.retried.inc()

    def job_ended(self, outcome: str) -> None:
        """A job ended: ``ended``, ``waiting``, ``refused``, ``busy``, ``taken_over`` or
        ``failed``."""
        self._running -= 1
        self.in_flight.set(self._running)
        not_done = {"failed": self.failed, "busy": self.busy, "taken_over": self.taken_over}
        if outcome in not_done:
            not_done[outcome].inc()
        else:
            self.done.labels(outcome=outcome).inc()

    def beat(self) -> None:
        """The event loop turned."""
        self._beat = time.monotonic()

    def state(self) -> dict[str, Any]:
        """What ``/healthz`` and ``/readyz`` answer with."""
        silent = time.monotonic() - self._beat
        lost = worker_log.lost()
        return {
            "worker": self.worker,
            "alive": silent < self.stalled_after,
            "ready": silent < self.stalled_after and not lost,
            "loop_silent_seconds": round(silent, 3),
            "lost": lost,
            "in_flight": self._running,
        }

    def serve(
        self, host: str, port: int, *, idle: float = IDLE_SECONDS, limit: int = MAX_CONNECTIONS
    ) -> HealthServer:
        """Start answering on ``host:port`` (0: any free port; see ``server_address``); a
        connection silent for ``idle`` seconds is closed, and beyond ``limit`` at once the one
        silent longest is."""
        return HealthServer((host, port), self.answer, idle=idle, limit=limit)

    async def answer(self, path: str) -> Answer:
        """The response to a GET of ``path``; /metrics is collected on a thread of its own, so
        a slow collection never holds a probe up."""
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, await asyncio.to_thread(generate_latest, self.registry)
        if path in ("/healthz", "/readyz"):
            state = self.state()
            if path == "/readyz" and state["ready"] and self.store is not None:
                why = await asyncio.to_thread(unreachable, self.store, PROBE_SECONDS)
                if why is not None:
                    state |= {"ready": False, "lost": {"store": why}}
            good = state["alive" if path == "/healthz" else "ready"]
            return 200 if good else 503, "application/json", json.dumps(state).encode()
        return 404, "text/plain", b"not found: /healthz, /readyz, /metrics\n"

    async def beating(self) -> None:
        """Beat until cancelled (a task on the worker's loop)."""
        while True:
            self.beat()
            await asyncio.sleep(BEAT_SECONDS)
