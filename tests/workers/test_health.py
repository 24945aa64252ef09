"""A worker's probes over real HTTP: /healthz while its loop turns, /readyz while connected,
/metrics as Prometheus text that prometheus_client's own parser reads back."""

from __future__ import annotations

import asyncio
import http.client
import json
import select
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gated_react.workers import log
from gated_react.workers.health import Health

from ..support.reaping import PATIENCE
from ..support.worker_procs import until


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


def test_silent_connections_time_out_and_free_their_threads() -> None:
    """150 connections that never send a byte held 150 threads of the worker 15 s later (a slow
    client could exhaust it); each is closed after ``idle`` seconds of silence now."""
    probe = Health("worker-t")
    server = probe.serve("127.0.0.1", 0, idle=0.5)
    url = "http://{}:{}".format(*server.server_address[:2])
    silent = _silent(url, 150)
    try:
        until(lambda: len(_ended(silent)) == 150, "every silent connection closed by the server")
        assert all(conn.recv(1) == b"" for conn in silent)
        assert server.serving == 0  # no thread left on them
        assert _get(url + "/healthz")[0] == 200
    finally:
        for conn in silent:
            conn.close()
        server.shutdown()
        server.server_close()


def test_connections_beyond_the_limit_are_closed_at_once_and_probes_answer_after() -> None:
    """However slowly clients trickle, the server holds at most ``limit`` threads."""
    probe = Health("worker-t")
    server = probe.serve("127.0.0.1", 0, idle=PATIENCE, limit=8)
    url = "http://{}:{}".format(*server.server_address[:2])
    silent: list[socket.socket] = []
    try:
        silent += _silent(url, 40)
        until(lambda: len(_ended(silent)) == 32, "the connections beyond 8 closed")
        assert all(conn.recv(1) == b"" for conn in _ended(silent))
        assert server.serving == 8
        for conn in silent:
            conn.close()
        until(lambda: _answered(url + "/healthz"), "a probe answered once slots are free")
    finally:
        for conn in silent:
            conn.close()
        server.shutdown()
        server.server_close()


def test_idle_connections_never_turn_a_real_probe_away() -> None:
    """Before: 32 idle connections took every slot for ``IDLE_SECONDS`` and a real probe was
    closed unanswered (``RemoteDisconnected``): an orchestrator would restart a healthy worker.
    The one silent the longest makes room now, and the limit still holds."""
    probe = Health("worker-t")
    server = probe.serve("127.0.0.1", 0, idle=PATIENCE)  # the default limit: 32
    url = "http://{}:{}".format(*server.server_address[:2])
    silent = _silent(url, 32)
    try:
        until(lambda: server.serving == 32, "every idle connection holds a slot")
        for _ in range(3):  # the first takes the oldest's place, and frees it for the next
            assert _get(url + "/healthz")[0] == 200
        until(lambda: bool(_ended(silent)), "the longest silent connection closed")
        assert _ended(silent) == [silent[0]]
        assert silent[0].recv(1) == b""
        until(lambda: server.serving == 31, "the probes' slots given back")  # their threads end
    finally:
        for conn in silent:
            conn.close()
        server.shutdown()
        server.server_close()


def _answered(url: str) -> bool:
    """A 200 from ``url``; False while the server still turns connections away: the threads of
    the closed connections end only when the server next reads them, which a loaded machine
    delays, and a probe refused then raised out of the wait (a flake at load 8)."""
    try:
        return _get(url)[0] == 200
    except (urllib.error.URLError, ConnectionError, http.client.HTTPException):
        return False


def _ended(conns: list[socket.socket]) -> list[socket.socket]:
    """The connections the server closed (readable: it never sends a byte unasked)."""
    return list(select.select(conns, [], [], 0)[0])
