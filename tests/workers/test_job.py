"""The job a worker runs: with a store key, an answer in the queue runs only with its signature.

Anyone with the database's credentials can write a row into procrastinate's jobs table; before,
a row ``enqueue_resume(..., {"approved": True})`` made a keyed worker run the call it approved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gated_react import open_checkpointer, read
from gated_react.workers import enqueue_resume, enqueue_run, install_queue, make_app

from ..support.cli import invoke
from ..support.helpers import REFUND_GOAL
from ..support.scenarios import graph_for
from ..support.worker_graphs import LOG_VAR
from ..support.worker_procs import Worker, fleet, until

KEY = "worker-store-key-" + "q" * 20
ASKING = "tests.support.worker_graphs:refund_with_approval"


def _statuses(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT status::text FROM procrastinate_jobs ORDER BY id").fetchall()
    return [str(row[0]) for row in rows]


def _stored(url: str) -> dict[str, Any]:
    with open_checkpointer(url, key=KEY) as saver:
        return dict(read(graph_for({}, saver), "ask"))


def _waits(url: str) -> bool:
    try:
        return bool(_stored(url)["pending"])
    except LookupError:  # not stored yet
        return False


def _tamper(url: str, job: int, answer: dict[str, Any]) -> None:
    """The job's row edited in the queue: its answer changed, its signature kept."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE procrastinate_jobs SET args = jsonb_set(args, '{answer}', %s::jsonb)"
            " WHERE id = %s",
            (json.dumps(answer), job),
        )


def _ends(workers: list[Worker]) -> list[dict[str, Any]]:
    return [line for worker in workers for line in worker.events("job_ended")]


@pytest.mark.postgres
def test_a_keyed_worker_refuses_an_answer_not_signed_with_its_key(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decisions = tmp_path / "decisions.tsv"
    monkeypatch.setenv(LOG_VAR, str(decisions))
    monkeypatch.setenv("GATED_REACT_STORE_KEY", KEY)
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        enqueue_run(app, REFUND_GOAL, thread_id="ask")
    (tmp_path / "first").mkdir()
    with fleet(pg_url, ASKING, 1, tmp_path / "first"):
        until(lambda: _waits(pg_url), "the run waits on its approval")
    asked = _stored(pg_url)["pending"][0]
    assert asked["tool"] == "get_user_billing"
    approve = {"approved": True}
    with app.open():  # the worker is stopped: every row is in the queue before it looks
        enqueue_resume(app, "ask", approve, question=asked["id"], key=())  # no key: unsigned
        enqueue_resume(app, "ask", approve, question=asked["id"], key="another-key-" + "x" * 20)
        rejected = enqueue_resume(app, "ask", {"approved": False, "reason": "no"},
                                  question=asked["id"])  # fmt: skip
    _tamper(pg_url, rejected, approve)  # a signed rejection turned into an approval
    (tmp_path / "second").mkdir()
    with fleet(pg_url, ASKING, 1, tmp_path / "second") as workers:
        until(lambda: len(_ends(workers)) == 3, "every answer job ended")
        until(lambda: _statuses(pg_url) == ["succeeded"] * 4, "no job failed")
    ends = _ends(workers)
    assert [line["outcome"] for line in ends] == ["refused"] * 3
    errors = [line["error"] for line in ends]
    assert "the job carries no signature" in errors[0]
    assert all("signature does not match" in error for error in errors[1:])
    after = _stored(pg_url)
    assert after["pending"][0]["id"] == asked["id"]  # still waiting, on the same question
    ran = [entry["action"]["name"] for entry in after["history"]]
    assert ran == ["get_user_profile"]  # the call it asks about never ran
    assert not decisions.exists()
    events = json.loads(invoke("show", "ask", "--db", pg_url, "--json").stdout)["events"]
    refusals = [e["message"] for e in events if e.get("decision") == "refused"]
    assert refusals == errors  # one run-log line each
    with app.open():
        enqueue_resume(app, "ask", approve, question=asked["id"])  # signed with the store key
    (tmp_path / "third").mkdir()
    with fleet(pg_url, ASKING, 1, tmp_path / "third"):
        until(lambda: len(_stored(pg_url)["history"]) > 1, "the signed answer ran the call")
    assert _stored(pg_url)["history"][1]["action"]["name"] == "get_user_billing"
