"""A worker's probes over real HTTP: /healthz while its loop turns, /readyz while connected,
/metrics as Prometheus text that prometheus_client's own parser reads back."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import select
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gated_react.workers import log
from gated_react.workers.health import Health

from ..support.reaping import PATIENCE
from ..support.worker_procs import fleet, until


@pytest.fixture
def health(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Health, str]]:
    monkeypatch.setattr(log, "_LOST", {})
    probe = Health("worker-t", stalled_after=0.5)
    server = probe.serve("127.0.0.1", 0)
    try:
        yield probe, "http://{}:{}".format(*server.server_address[:2])
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return int(exc.code), exc.read().decode()


def _samples(url: str) -> dict[str, float]:
    status, body = _get(url + "/metrics")
    assert status == 200
    return {
        sample.name + json.dumps(sample.labels, sort_keys=True): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name.startswith("gated_react_")
    }


def test_metrics_count_jobs_done_failed_retried_and_in_flight(health: tuple[Health, str]) -> None:
    probe, url = health
    probe.job_started(attempt=1)
    probe.job_started(attempt=2)  # a retry
    probe.job_started(attempt=1)
    assert _samples(url)["gated_react_jobs_in_flight{}"] == 3
    probe.job_ended("ended")
    probe.job_ended("waiting")
    probe.job_ended("failed")
    samples = _samples(url)
    assert samples['gated_react_jobs_done_total{"outcome": "ended"}'] == 1
    assert samples['gated_react_jobs_done_total{"outcome": "waiting"}'] == 1
    assert samples["gated_react_jobs_failed_total{}"] == 1
    assert samples["gated_react_jobs_retried_total{}"] == 1
    assert samples["gated_react_jobs_in_flight{}"] == 0


def test_busy_and_taken_over_jobs_are_counted_apart_from_failed(
    health: tuple[Health, str],
) -> None:
    """A try that met its thread held by a stalled worker's, and the stalled worker's own try
    given up, are not failures (``heartbeat.failed_as``)."""
    probe, url = health
    for outcome in ("busy", "busy", "taken_over"):
        probe.job_started(attempt=2)
        probe.job_ended(outcome)
    samples = _samples(url)
    assert samples["gated_react_jobs_busy_total{}"] == 2
    assert samples["gated_react_jobs_taken_over_total{}"] == 1
    assert samples["gated_react_jobs_failed_total{}"] == 0
    assert not any(name.startswith("gated_react_jobs_done_total") for name in samples)
    assert samples["gated_react_jobs_in_flight{}"] == 0


def test_healthz_fails_once_the_loop_stops_beating(health: tuple[Health, str]) -> None:
    probe, url = health
    probe.beat()
    status, body = _get(url + "/healthz")
    assert status == 200
    assert json.loads(body)["worker"] == "worker-t"
    deadline = time.monotonic() + 30
    while _get(url + "/healthz")[0] == 200 and time.monotonic() < deadline:
        time.sleep(0.2)  # nothing beats: the loop looks stuck after stalled_after (0.5 s)
    status, body = _get(url + "/healthz")
    assert status == 503
    assert json.loads(body)["alive"] is False


def test_the_beating_task_keeps_a_worker_alive(health: tuple[Health, str]) -> None:
    probe, url = health

    async def beat_for_a_while() -> int:
        task = asyncio.create_task(probe.beating())
        await asyncio.sleep(1.2)  # longer than stalled_after: only the beats keep it alive
        status = await asyncio.to_thread(lambda: _get(url + "/healthz")[0])
        task.cancel()
        return status

    assert asyncio.run(beat_for_a_while()) == 200


def test_readyz_fails_while_a_connection_is_lost(health: tuple[Health, str]) -> None:
    probe, url = health
    probe.beat()
    assert _get(url + "/readyz")[0] == 200
    log.connection_lost("worker-t", "server closed the connection unexpectedly")
    status, body = _get(url + "/readyz")
    assert status == 503
    assert list(json.loads(body)["lost"]) == ["store"]
    assert _get(url + "/healthz")[0] == 200  # alive: restarting it would not help
    log.reconnected("worker-t", seconds=1.0, attempts=2)
    assert _get(url + "/readyz")[0] == 200


def test_other_paths_are_404(health: tuple[Health, str]) -> None:
    assert _get(health[1] + "/admin")[0] == 404


def _silent(url: str, count: int) -> list[socket.socket]:
    host, port = url.removeprefix("http://").split(":")
    return [socket.create_connection((host, int(port)), timeout=30) for _ in range(count)]


def test_silent_connections_time_out() -> None:
    """150 connections that never send a byte: each closed after ``idle`` seconds of silence."""
    probe = Health("worker-t")
    server = probe.serve("127.0.0.1", 0, idle=0.5)
    url = "http://{}:{}".format(*server.server_address[:2])
    silent = _silent(url, 150)
    try:
        until(lambda: len(_ended(silent)) == 150, "every silent connection closed by the server")
        assert all(conn.recv(1) == b"" for conn in silent)
        until(lambda: server.open_connections == 0, "none left open")
        assert _get(url + "/healthz")[0] == 200
    finally:
        for conn in silent:
            conn.close()
        server.shutdown()
        server.server_close()


def test_a_probe_is_answered_while_idle_connections_are_open() -> None:
    """40 connections opened and left silent, then a real probe. Each connection held one of 32
    threads: the probe was closed unanswered (``RemoteDisconnected``) for as long as they
    stayed, and an orchestrator would have restarted a healthy worker. Silent connections hold
    no thread now, and the probe is answered while they are all still open."""
    probe = Health("worker-t")
    probe.beat()
    server = probe.serve("127.0.0.1", 0, idle=PATIENCE)
    url = "http://{}:{}".format(*server.server_address[:2])
    threads = threading.active_count()
    silent = _silent(url, 40)  # accepted before the probe: in the order they connected
    try:
        status, body = _get(url + "/healthz")
        assert status == 200
        assert json.loads(body)["alive"] is True
        assert _ended(silent) == []  # all still open
        assert threading.active_count() <= threads  # no thread per connection
        until(lambda: server.open_connections == 40, "the probe's own connection closed")
    finally:
        for conn in silent:
            conn.close()
        server.shutdown()
        server.server_close()


def test_beyond_the_limit_the_connection_silent_longest_makes_room() -> None:
    """However many connections wait, a new probe gets in: the oldest silent one is closed."""
    probe = Health("worker-t")
    server = probe.serve("127.0.0.1", 0, idle=PATIENCE, limit=8)
    url = "http://{}:{}".format(*server.server_address[:2])
    silent: list[socket.socket] = []
    try:
        silent += _silent(url, 40)  # accepted in the order they connected
        until(lambda: len(_ended(silent)) == 32, "all 40 accepted")
        assert _ended(silent) == silent[:32]  # the oldest went first
        assert server.open_connections == 8
        assert _get(url + "/healthz")[0] in (200, 503)
        until(lambda: _ended(silent) == silent[:33], "the probe took the oldest one's place")
    finally:
        for conn in silent:
            conn.close()
        server.shutdown()
        server.server_close()


def test_a_request_trickled_a_byte_at_a_time_is_cut_off_at_the_idle_time() -> None:
    """A byte every 20 ms kept a connection (and its thread) for as long as the client went on:
    each read had its own timeout. The request must now arrive whole within ``idle``."""
    probe = Health("worker-t")
    server = probe.serve("127.0.0.1", 0, idle=0.5)
    url = "http://{}:{}".format(*server.server_address[:2])
    (slow,) = _silent(url, 1)
    trickle = b"GET /healthz HTTP/1.1\r\nX-Padding: " + b"a" * 400  # 8 s at this pace
    sent = 0
    try:
        with contextlib.suppress(ConnectionError):  # closed between a check and a send
            while sent < len(trickle) and not _ended([slow]):
                slow.send(trickle[sent : sent + 1])
                sent += 1
                time.sleep(0.02)
        assert sent < len(trickle)
        with contextlib.suppress(ConnectionResetError):  # bytes sent after the close: a reset
            assert slow.recv(100) == b""  # closed unanswered
    finally:
        slow.close()
        server.shutdown()
        server.server_close()


def test_a_scraper_keeps_its_connection_for_the_next_scrape(health: tuple[Health, str]) -> None:
    host, port = health[1].removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        for path in ("/metrics", "/healthz", "/metrics"):
            conn.request("GET", path)
            response = conn.getresponse()
            assert response.status in (200, 503)
            assert response.read()
            assert response.getheader("Connection") == "keep-alive"
        conn.request("HEAD", "/metrics")
        head = conn.getresponse()
        assert (head.status, head.read()) == (200, b"")
    finally:
        conn.close()


def test_what_is_not_a_get_is_refused_and_closed(health: tuple[Health, str]) -> None:
    host, port = health[1].removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/healthz", body=b"{}")
        response = conn.getresponse()
        assert (response.status, response.getheader("Connection")) == (405, "close")
    finally:
        conn.close()


def _ended(conns: list[socket.socket]) -> list[socket.socket]:
    """The connections the server closed (readable: it never sends a byte unasked)."""
    ready = set(select.select(conns, [], [], 0)[0])
    return [conn for conn in conns if conn in ready]


@pytest.mark.postgres
def test_a_real_workers_probe_answers_past_40_idle_connections(pg_url: str, tmp_path: Path) -> None:
    """The worker process as an orchestrator sees it: 40 idle connections to its health port
    (a load balancer's pool, a stuck client), then the liveness probe."""
    with fleet(pg_url, "tests.support.worker_graphs:refund", 1, tmp_path) as (worker,):
        silent = _silent(worker.health, 40)
        try:
            status, body = worker.get("/healthz")
            assert (status, json.loads(body)["alive"]) == (200, True)
            assert _ended(silent) == []
        finally:
            for conn in silent:
                conn.close()


def _served(probe: Health) -> Iterator[str]:
    server = probe.serve("127.0.0.1", 0)
    try:
        yield "http://{}:{}".format(*server.server_address[:2])
    finally:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_readyz_asks_the_store_an_idle_worker_has_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: an idle worker answered 200 through a whole store outage (no connection of its
    had failed yet). Nothing listens on the store's port here: not ready, and why."""
    monkeypatch.setattr(log, "_LOST", {})
    down = f"postgresql://postgres@127.0.0.1:{_closed_port()}/gone"
    for url in _served(Health("worker-idle", store=down)):
        status, body = _get(url + "/readyz")
        assert status == 503
        assert "store" in json.loads(body)["lost"]
        assert _get(url + "/healthz")[0] == 200  # alive: only not ready


@pytest.mark.postgres
def test_readyz_is_ready_when_the_store_answers(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log, "_LOST", {})
    for url in _served(Health("worker-up", store=pg_url)):
        status, body = _get(url + "/readyz")
        assert (status, json.loads(body)["lost"]) == (200, {})
