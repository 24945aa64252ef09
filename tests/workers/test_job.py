"""The job a worker runs: with a store key, an answer in the queue runs only with its
signature; an answer's job tried again after its worker died continues the run.

Anyone with the database's credentials can write a row into procrastinate's jobs table; before,
a row ``enqueue_resume(..., {"approved": True})`` made a keyed worker run the call it approved.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gated_react import open_checkpointer, read
from gated_react.workers import enqueue_resume, enqueue_run, install_queue, make_app

from ..snapshots.make_cef713a_stores import restore
from ..support.cli import invoke
from ..support.helpers import REFUND_GOAL
from ..support.openai_server import FakeOpenAI
from ..support.procs import WAIT
from ..support.scenarios import graph_for
from ..support.worker_graphs import (
    LOG_VAR,
    MODEL_URL_VAR,
    PAYMENTS_VAR,
    hang_in_pay_once,
    pay_reply,
    taken_by,
)
from ..support.worker_procs import Worker, fleet, until

KEY = "worker-store-key-" + "q" * 20
ASKING = "tests.support.worker_graphs:refund_with_approval"
PAYS_ASKING = "tests.support.worker_graphs:pays_after_approval"


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


# --- a worker killed inside an approved payment --------------------------------------------
#
# The job that answered the question pays, and its worker is SIGKILLed before the payment
# returns. The fleet's stalled-job recovery tries the job again; it used to resend its answer,
# be refused as a double click ("thread is not waiting for an answer") and leave the run
# stranded: not in `questions`, nothing queued. The retried job now continues the run, and the
# run's record settles it: a question where the payment is under approval, else a stop.

PAYING = "paying"
STALLED_AFTER = "1.5"


def _asking(url: str) -> dict[str, Any] | None:
    """The question the paying run waits on, if it waits on one."""
    try:
        pending = _read(url, PAYING)["pending"]
    except LookupError:  # not stored yet
        return None
    return dict(pending[0]) if pending else None


def _read(url: str, thread: str) -> dict[str, Any]:
    with open_checkpointer(url) as saver:
        return dict(read(graph_for({}, saver), thread))


def _jobs(url: str) -> list[tuple[str, int]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT status::text, attempts FROM procrastinate_jobs ORDER BY id"
        ).fetchall()
    return [(str(status), int(attempts)) for status, attempts in rows]


def _killed_in_pay(url: str, armed: Path, workers: list[Worker]) -> tuple[dict[str, Any], Any]:
    """The run started, its question answered with ``gated-react answer``, the worker that
    took the answer killed inside the payment, and the job tried again by the fleet: the
    question answered, and the retried job's end line."""
    app = make_app(url)
    with app.open():
        enqueue_run(app, "Pay order 7", thread_id=PAYING)
    until(lambda: _asking(url) is not None, "the run asks its first question")
    asked = _asking(url) or {}
    assert asked["kind"] == "approval"
    queued = json.loads(invoke("answer", PAYING, "--approve", "--db", url, "--json").stdout)
    assert queued["queued"] is True
    until(lambda: taken_by(armed) is not None, "a worker is inside the payment")
    (doomed,) = [w for w in workers if w.proc.pid == taken_by(armed)]
    doomed.proc.send_signal(signal.SIGKILL)
    doomed.proc.wait(WAIT)
    until(lambda: _finished(url, 2), "the fleet tried the answer's job again")
    assert _jobs(url) == [("succeeded", 1), ("succeeded", 2)]  # tries: 1, then 2
    (end,) = [
        line for w in workers for line in w.events("job_ended") if line["job"] == queued["job"]
    ]
    assert end["attempt"] == 2  # the killed try left no end line
    return asked, end


def _finished(url: str, count: int) -> bool:
    """The queue holds ``count`` jobs, none waiting to run or running."""
    jobs = _jobs(url)
    return len(jobs) == count and all(status not in ("todo", "doing") for status, _ in jobs)


@pytest.mark.postgres
def test_a_worker_killed_inside_an_approved_payment_leaves_a_question(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = tmp_path / "payments.tsv"
    monkeypatch.setenv(PAYMENTS_VAR, str(payments))
    armed = hang_in_pay_once(tmp_path, monkeypatch)
    install_queue(pg_url)
    app = make_app(pg_url)
    with FakeOpenAI(default=pay_reply) as server:
        monkeypatch.setenv(MODEL_URL_VAR, server.base_url)
        with fleet(pg_url, PAYS_ASKING, 2, tmp_path, "--stalled-after", STALLED_AFTER) as workers:
            first, retried = _killed_in_pay(pg_url, armed, workers)
            assert retried["outcome"] == "waiting"
            listed = json.loads(invoke("questions", "--db", pg_url, "--json").stdout)
            (row,) = listed["questions"]
            assert (row["thread_id"], row["kind"], row["tool"]) == (
                PAYING,
                "outcome_unknown",
                "pay",
            )
            assert row["started_by"] == "workers"
            with app.open():  # the first approval sent again on purpose: a double click
                again = enqueue_resume(app, PAYING, {"approved": True}, question=first["id"])
            until(lambda: _finished(pg_url, 3), "the second answer's job ended")
            ends = {line["job"]: line for w in workers for line in w.events("job_ended")}
            assert ends[again]["outcome"] == "refused"
            assert "is not waiting for an answer to question" in ends[again]["error"]
            assert (_asking(pg_url) or {}).get("id") == row["question"]  # still asked
            said = invoke("answer", PAYING, "--respond", "paid: USD 17.00", "--db", pg_url)
            assert "queued for the workers" in said.stdout, said.output
            until(lambda: _read(pg_url, PAYING)["stop_reason"] == "success", "the run ended")
    assert len(payments.read_text().splitlines()) == 1  # paid exactly once
    history = _read(pg_url, PAYING)["history"]
    assert [e["action"]["name"] for e in history] == ["look_up_order", "pay"]
    assert history[1]["observation"] == "paid: USD 17.00"  # what the human said came of it


@pytest.mark.postgres
def test_a_worker_killed_inside_a_payment_without_approval_stops_the_run(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = tmp_path / "payments.tsv"
    monkeypatch.setenv(PAYMENTS_VAR, str(payments))
    armed = hang_in_pay_once(tmp_path, monkeypatch)
    install_queue(pg_url)
    factory = "tests.support.worker_graphs:pays_after_an_approved_look_up"
    with FakeOpenAI(default=pay_reply) as server:
        monkeypatch.setenv(MODEL_URL_VAR, server.base_url)
        with fleet(pg_url, factory, 2, tmp_path, "--stalled-after", STALLED_AFTER) as workers:
            _, retried = _killed_in_pay(pg_url, armed, workers)
    assert (retried["outcome"], retried["stop_reason"]) == ("ended", "tool_outcome_unknown:pay")
    ended = _read(pg_url, PAYING)
    assert (ended["status"], ended["stop_reason"]) == ("stopped", "tool_outcome_unknown:pay")
    assert "pay may already have run" in ended["message"]
    listed = json.loads(invoke("questions", "--db", pg_url, "--json").stdout)
    assert listed["questions"] == []
    shown = invoke("show", PAYING, "--db", pg_url)
    assert "tool_outcome_unknown:pay" in shown.stdout, shown.output
    assert len(payments.read_text().splitlines()) == 1  # paid once, reported as possibly paid


@pytest.mark.postgres
def test_an_answer_to_a_run_an_old_release_left_paused_is_refused_not_retried(
    pg_url: str, tmp_path: Path
) -> None:
    """A store of the release before 0.1.0 (cef713a): its paused run has no step to continue.
    The answer's job ends ``refused`` at its first try with the line that says what to do, and
    the thread is as it was."""
    restore(pg_url)
    install_queue(pg_url)
    with open_checkpointer(pg_url) as saver:
        before = read(graph_for({}, saver), "paused")
    app = make_app(pg_url)
    with app.open():
        enqueue_resume(app, "paused", {"approved": True}, question=before["pending"][0]["id"])
    with fleet(pg_url, ASKING, 1, tmp_path) as workers:
        until(lambda: _statuses(pg_url) == ["succeeded"], "the answer's job ended")
    [ended] = _ends(workers)
    assert ended["outcome"] == "refused"
    assert "left at gate by gated-react before 0.1.0" in ended["error"]
    assert "ask its question again" in ended["error"]
    with open_checkpointer(pg_url) as saver:
        assert read(graph_for({}, saver), "paused") == before
