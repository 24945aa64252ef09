"""A worker exports its runs' spans where the OTEL_* variables it was started with say: a run
taken from the queue is one ``invoke_agent`` span with its children, in a real Arize Phoenix
(the worker flushes at exit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gated_react.workers import enqueue_run, install_queue, make_app, start_workers

from ..support.helpers import REFUND_GOAL
from ..support.phoenix import Phoenix
from ..support.procs import WAIT
from ..support.worker_graphs import LOG_VAR

pytestmark = [pytest.mark.postgres, pytest.mark.phoenix]


def test_a_workers_run_is_traced(
    pg_url: str, phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_VAR, str(tmp_path / "decisions.tsv"))  # the scripted model logs there
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "gated-react-worker")
    install_queue(pg_url)
    with make_app(pg_url).open() as app:
        enqueue_run(app, REFUND_GOAL, thread_id="worker-refund")
    (proc,) = start_workers(pg_url, "tests.support.worker_graphs:refund", 1, burst=True)
    try:
        assert proc.wait(WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
    spans = phoenix.conversation("worker-refund", 11)
    names = [s["name"] for s in spans]
    assert names.count("invoke_agent gated-react") == 1
    assert names.count("apply_guardrail gate") == 3
    assert len([n for n in names if n.startswith("execute_tool")]) == 3
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["attributes"]["gated_react.stop_reason"] == "success"
