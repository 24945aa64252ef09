"""What a worker's /metrics says of its runs and of the store, scraped from a real worker whose
model is the real ``ChatOpenAI`` on the local chat-completions server: runs by stop reason (a
model outage is ``llm_error``, where the jobs' counter said ``ended``), tokens, cost, model
call latency, tool calls by outcome, questions waiting and the queue's backlog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gated_react import open_checkpointer, read
from gated_react.workers import enqueue_resume, enqueue_run, install_queue, make_app
from gated_react.workers.metrics import Spent, spent_of, tool_outcome

from ..support.openai_server import Delay, FakeOpenAI, Status, reply
from ..support.reaping import PATIENCE
from ..support.scenarios import graph_for
from ..support.worker_graphs import MODEL_URL_VAR, PAYMENTS_VAR, pay_reply
from ..support.worker_procs import Worker, fleet, until

FACTORY = "tests.support.worker_graphs:pays_after_approval"


def _model(request: dict[str, Any]) -> Any:
    """Order 13's model is down (500), order 99's hangs, the others pay as scripted."""
    goal = next((str(m["content"]) for m in request.get("messages", []) if m["role"] == "user"), "")
    if "order 13" in goal:
        return Status(500, "the model server is down")
    if "order 99" in goal:
        return Delay(PATIENCE, reply("late"))
    return pay_reply(request)


def _stored(url: str, thread: str) -> dict[str, Any]:
    with open_checkpointer(url) as saver:
        return dict(read(graph_for({}, saver), thread))


def _ended(worker: Worker) -> int:
    return len(worker.events("job_ended"))


@pytest.mark.postgres
def test_a_workers_metrics_tell_its_runs_and_the_stores_backlog(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_queue(pg_url)
    app = make_app(pg_url)
    monkeypatch.setenv(PAYMENTS_VAR, str(tmp_path / "payments.tsv"))
    with FakeOpenAI(default=_model) as server, app.open():
        monkeypatch.setenv(MODEL_URL_VAR, server.base_url)
        with fleet(pg_url, FACTORY, 1, tmp_path) as (worker,):
            enqueue_run(app, "Pay order 7", thread_id="paid")
            enqueue_run(app, "Pay order 13", thread_id="outage")
            until(lambda: _ended(worker) == 2, "both jobs ended")
            assert worker.metric("gated_react_runs_ended_total", stop_reason="llm_error") == 1
            assert worker.metric("gated_react_jobs_done_total", outcome="ended") == 1
            assert worker.metric("gated_react_questions_waiting") == 1
            assert worker.metric("gated_react_questions_oldest_age_seconds") > 0
            assert worker.metric("gated_react_store_up") == 1

            question = _stored(pg_url, "paid")["pending"][0]
            enqueue_resume(app, "paid", {"approved": True}, question=question["id"])
            until(lambda: _ended(worker) == 3, "the answered run ended")
            paid, outage = _stored(pg_url, "paid"), _stored(pg_url, "outage")
            assert (paid["stop_reason"], outage["stop_reason"]) == (
                "success",
                "llm_error:server_error",
            )
            _counts_what_the_runs_spent(worker, paid, outage)

            enqueue_run(app, "Pay order 99", thread_id="hung")
            until(lambda: len(server.requests) == 5, "the hung run asked its model")
            enqueue_resume(app, "hung")  # behind the running one: jobs of a thread take turns
            assert worker.metric("gated_react_queue_jobs", status="running") == 1
            assert worker.metric("gated_react_queue_jobs", status="queued") == 1
            assert worker.metric("gated_react_queue_oldest_job_age_seconds") > 0


def _counts_what_the_runs_spent(
    worker: Worker, paid: dict[str, Any], outage: dict[str, Any]
) -> None:
    assert worker.metric("gated_react_runs_ended_total", stop_reason="success") == 1
    assert worker.metric("gated_react_runs_ended_total", stop_reason="llm_error") == 1
    assert worker.metric("gated_react_questions_waiting") == 0
    assert worker.metric("gated_react_questions_oldest_age_seconds") == 0
    assert worker.metric("gated_react_tool_calls_total", outcome="ok") == 2  # look up, pay
    for kind in ("input", "output"):
        spent = paid["usage"][f"{kind}_tokens"] + outage["usage"][f"{kind}_tokens"]
        assert spent > 0
        assert worker.metric("gated_react_model_tokens_total", kind=kind) == spent
    assert paid["usage"]["cost"] > 0
    assert worker.metric("gated_react_model_cost_usd_total") == pytest.approx(
        paid["usage"]["cost"] + (outage["usage"]["cost"] or 0)
    )
    latency = "gated_react_model_call_duration_seconds_count"
    assert worker.metric(latency, outcome="ok") == 3  # look up, pay, answer
    assert worker.metric(latency, outcome="error") == 1  # the 500, not retried by the client


def _result(**fields: Any) -> dict[str, Any]:
    usage = {"input_tokens": 0, "output_tokens": 0, "estimated_tokens": 0, "cost": None}
    return {
        "status": None,
        "stop_reason": None,
        "trace": [],
        **fields,
        "usage": usage | fields.get("usage", {}),
    }


def test_a_job_counts_what_its_run_spent_since_the_job_began() -> None:
    before = _result(
        usage={"input_tokens": 100, "output_tokens": 10, "cost": 0.5},
        trace=[{"tool": "a", "ok": True}],
    )
    after = _result(
        status="stopped",
        stop_reason="tool_timeout:search",
        usage={"input_tokens": 150, "output_tokens": 30, "cost": 0.75},
        trace=[
            {"tool": "a", "ok": True},
            {"tool": "max_steps", "ok": True, "extended": "max_steps 8 -> 12 (approve)"},
            {"tool": "b", "ok": False, "by_human": True},
            {"tool": "search", "ok": False, "stop_reason": "tool_timeout:search"},
        ],
    )
    grown = spent_of(after).since(spent_of(before))
    assert grown.stop_reason == "tool_timeout"  # the detail names a tool: never a label
    assert dict(grown.tokens) == {"input": 50, "output": 20, "estimated": 0}
    assert grown.cost == pytest.approx(0.25)
    assert dict(grown.tools) == {"answered_by_human": 1, "tool_timeout": 1}


def test_a_run_that_had_ended_already_is_not_counted_again() -> None:
    ended = _result(status="ok", stop_reason="success", usage={"input_tokens": 5})
    assert spent_of(ended).since(spent_of(ended)) == Spent(
        tokens={"input": 0, "output": 0, "estimated": 0}, cost=None
    )


def test_a_new_run_on_the_thread_counts_from_zero() -> None:
    earlier = _result(status="ok", stop_reason="success", usage={"input_tokens": 90})
    newer = _result(usage={"input_tokens": 20}, trace=[{"tool": "a", "ok": True}])
    grown = spent_of(newer).since(spent_of(earlier))
    assert grown.tokens["input"] == 20
    assert grown.tools["ok"] == 1


@pytest.mark.parametrize(
    ("entry", "outcome"),
    [
        ({"ok": True}, "ok"),
        ({"ok": False, "by_human": True}, "answered_by_human"),
        ({"ok": False, "error": "tool_denied:refund"}, "tool_denied"),
        ({"ok": False, "error": "loop_detected"}, "loop_detected"),
        ({"ok": False, "error": "something else"}, "error"),
    ],
)
def test_tool_outcomes_are_a_closed_set(entry: dict[str, Any], outcome: str) -> None:
    assert tool_outcome(entry) == outcome
