"""A worker's liveness and numbers, for an orchestrator and for Prometheus, over HTTP.

``GET /healthz``  200 while the worker's event loop turns (it beats every second), else 503:
                  a worker stuck in a blocking call is dead to its jobs; restart it.
``GET /readyz``   200 when alive and no connection is lost (``worker_log.connection_lost``
                  until ``reconnected``), else 503: the worker waits for its store.
``GET /metrics``  Prometheus text: jobs done (by outcome), failed, retried, in flight.

The server runs on a daemon thread of the worker process, so a busy or blocked event loop still
answers (with 503). Each connection has a thread of its own, at most ``MAX_CONNECTIONS`` at once,
and is closed after ``IDLE_SECONDS`` of silence: a client that opens connections and sends
nothing cannot exhaust the worker. When all are taken, the connection silent the longest (no
request line yet) is closed to serve the new one, so idle connections never turn a probe away.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from gated_react.workers import log as worker_log

BEAT_SECONDS = 1.0
"""How often the worker's loop says it is alive."""
IDLE_SECONDS = 10.0
"""A probe connection silent this long is closed (it holds a thread of the worker)."""
MAX_CONNECTIONS = 32
"""Probe connections served at once; more are closed unanswered until one ends."""


class Health:
    """One worker process's liveness and job counters (its own Prometheus registry)."""

    def __init__(self, worker: str, *, stalled_after: float = 30.0) -> None:
        self.worker = worker
        self.stalled_after = stalled_after
        self.registry = CollectorRegistry()
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
        """A job ended: ``ended``, ``waiting`` or ``failed``."""
        self._running -= 1
        self.in_flight.set(self._running)
        if outcome == "failed":
            self.failed.inc()
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
        connection silent for ``idle`` seconds is closed, and beyond ``limit`` at once a new one
        is closed unanswered."""
        health = self

        class Handler(_Handler):
            owner = health
            timeout = idle  # each read and write of a connection (socketserver's own setting)

        server = HealthServer((host, port), Handler, limit)
        threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
        return server

    async def beating(self) -> None:
        """Beat until cancelled (a task on the worker's loop)."""
        import asyncio

        while True:
            self.beat()
            await asyncio.sleep(BEAT_SECONDS)


class HealthServer(ThreadingHTTPServer):
    """A thread per connection, at most ``limit`` of them: a client that opens connections and
    stays silent (or trickles a byte at a time) holds no more than that, each until it times
    out, and the worker's loop never waits on them."""

    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 made a burst of connects wait for SYN retries

    def __init__(self, address: tuple[str, int], handler: type[_Handler], limit: int) -> None:
        super().__init__(address, handler)
        self.limit = limit
        self.serving = 0
        """Connections served now, each on a thread of its own."""
        self._count = threading.Lock()
        self._silent: dict[Any, None] = {}
        """The connections that have sent no request line yet, the longest silent first."""
        self._dropped: set[Any] = set()
        """Connections closed to make room, whose threads are still ending (counted out)."""

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count:
            if self.serving < self.limit:
                self.serving += 1
            elif self._silent:  # the longest silent makes room: its read ends at once, empty
                oldest = next(iter(self._silent))
                del self._silent[oldest]
                self._dropped.add(oldest)
                _hang_up(oldest)
            else:
                self.shutdown_request(request)  # every slot is answering a request: try again
                return
            self._silent[request] = None
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._ended(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._ended(request)

    def _ended(self, request: Any) -> None:
        with self._count:
            self._silent.pop(request, None)
            if request in self._dropped:
                self._dropped.discard(request)
            else:
                self.serving -= 1

    def spoke(self, request: Any) -> None:
        """``request`` sent its request line: it is no longer the one to close first."""
        with self._count:
            self._silent.pop(request, None)


def _hang_up(request: Any) -> None:
    """End a connection another thread reads: its read returns at once, empty."""
    with contextlib.suppress(OSError):
        request.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    owner: Health
    server: HealthServer

    def parse_request(self) -> bool:
        self.server.spoke(self.request)
        return super().parse_request()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, CONTENT_TYPE_LATEST, generate_latest(self.owner.registry))
        elif path in ("/healthz", "/readyz"):
            state = self.owner.state()
            good = state["alive" if path == "/healthz" else "ready"]
            self._send(200 if good else 503, "application/json", json.dumps(state).encode())
        else:
            self._send(404, "text/plain", b"not found: /healthz, /readyz, /metrics\n")

    def _send(self, code: int, kind: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds would drown the job lines on stderr."""
