"""Crash-safe side effects with real kills: a tool that appends a line to a file never runs twice
unless it says it may, and the idempotency key it gets is stable across the crash.

The run-once record says where a call that is not idempotent was when its process died: not
started (killed before it ran: it runs once), started and not done (killed inside it: its
outcome is unknown, and the run stops or asks a human), done (killed after it returned: the
model is shown what it returned). On a real SQLite file and on Postgres."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gated_react import open_checkpointer

from ..support.procs import children, wait_until
from ..support.scenarios import lines

APPROVE_APPEND = {"require_approval": ["append_line"]}
TEXT = "refund 42: USD 49"
REPO = Path(__file__).resolve().parents[2]

INSIDE = """
import json, sys, time
from pathlib import Path

from gated_react import open_checkpointer, resume, run
from tests.support import scenarios
from tests.support.helpers import REFUND_GOAL

spec = json.loads(sys.argv[1])
real = scenarios.append_line.func


def appending_then_hanging(path, text, idempotency_key=""):
    real(path, text, idempotency_key)
    Path(spec["marker"]).touch()
    time.sleep(600)


scenarios.append_line.func = appending_then_hanging
with open_checkpointer(spec["url"]) as saver:
    graph = scenarios.graph_for(spec, saver)
    if spec["op"] == "run":
        run(graph, REFUND_GOAL, thread_id=spec["thread"])
    else:
        resume(graph, spec["thread"], spec["answer"])
"""
"""A process that runs (or resumes with ``answer``) a thread until it is inside append_line,
after its line is written and before it returns: where a SIGKILL leaves ``started`` and no
``done`` in the record."""


def killed_inside_the_call(tmp_path: Path, url: str, op: str, **spec: Any) -> None:
    """Run ``op`` in a process of its own, and SIGKILL it inside the payment."""
    marker, log = tmp_path / "inside-the-call", tmp_path / "inside.log"
    spec = {"url": url, "thread": "pay", "op": op, "marker": str(marker), **spec}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with open(log, "wb") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", INSIDE, json.dumps(spec)], cwd=REPO, env=env, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_until(lambda: marker.exists() or child.poll() is not None)
            assert marker.exists(), log.read_text()[-3000:]
        finally:
            child.kill()
            child.wait()


def keys(file: Path) -> list[str]:
    """The idempotency key each line was written with."""
    return [line.rsplit("key=", 1)[1] for line in lines(file)]


def in_execute(kids: Any, phase: str) -> dict[str, Any]:
    return {"node": "execute", "phase": phase, "marker": kids.path("inside")}


def test_a_call_killed_inside_is_never_repeated_and_the_run_says_what_to_check(
    store_url: str, tmp_path: Path
) -> None:
    file = tmp_path / "payments.txt"
    spec = {"tools": "append", "script": "append", "file": str(file)}
    killed_inside_the_call(tmp_path, store_url, "run", **spec)
    assert len(lines(file)) == 1
    with children(tmp_path) as kids:
        out = kids.start(store_url, "pay", "resume", **spec).result()
    assert out["stop_reason"] == "tool_outcome_unknown:append_line"
    assert "may already have run" in out["message"]
    # what to do next, and the key to look for: the one the tool was given
    (key,) = keys(file)
    assert f"look up idempotency key {key} in the system append_line talks to" in out["message"]
    assert "then say what you found in a new message" in out["message"]
    assert out["trace"][-1]["stop_reason"] == "tool_outcome_unknown:append_line"
    assert out["history"] == []
    assert len(lines(file)) == 1


@pytest.mark.parametrize("phase", ["entered", "finished"])
def test_a_call_killed_before_or_after_it_ran_runs_once(
    store_url: str, tmp_path: Path, phase: str
) -> None:
    """Killed as execute starts (nothing claimed: the call never started) it runs once on
    resume; killed after it returned (its ``done`` recorded, the checkpoint not stored) the
    record answers it. Before issue 43 both stopped ``tool_outcome_unknown``."""
    file = tmp_path / "payments.txt"
    spec = {"tools": "append", "script": "append", "file": str(file)}
    with children(tmp_path) as kids:
        first = kids.start(store_url, "pay", "run", block=in_execute(kids, phase), **spec)
        first.wait_for(kids.path("inside"))
        first.kill()
        assert len(lines(file)) == (0 if phase == "entered" else 1)
        out = kids.start(store_url, "pay", "resume", **spec).result()
    assert out["stop_reason"] == "success"
    assert [entry["observation"] for entry in out["history"]] == ["appended"]
    assert len(lines(file)) == 1


@pytest.mark.parametrize(
    ("answer", "stop_reason", "count"),
    [
        (
            {"approved": False, "reason": "the bank shows it went through"},
            "tool_outcome_unknown",
            1,
        ),
        ({"approved": True}, "success", 2),
    ],
)
def test_under_approval_a_human_decides_whether_to_repeat_it(
    store_url: str, tmp_path: Path, answer: dict[str, Any], stop_reason: str, count: int
) -> None:
    file = tmp_path / "payments.txt"
    spec = {"tools": "append", "script": "append", "file": str(file), "policy": APPROVE_APPEND}
    with children(tmp_path) as kids:
        asked = kids.start(store_url, "pay", "run", **spec).result()
        assert asked["pending"][0]["kind"] == "approval"
        killed_inside_the_call(tmp_path, store_url, "resume", answer={"approved": True}, **spec)
        assert len(lines(file)) == 1
        again = kids.start(store_url, "pay", "resume", **spec).result()
        question = again["pending"][0]
        assert question["kind"] == "outcome_unknown"
        assert question["tool"] == "append_line"
        assert "may already have run" in question["why"]
        out = kids.start(store_url, "pay", "resume", answer=answer, **spec).result()
    assert out["stop_reason"].startswith(stop_reason)
    assert len(lines(file)) == count
    assert len(set(keys(file))) == 1  # run again under the same key: a server can dedupe


def test_a_call_that_returned_before_a_kill_is_answered_from_the_record(
    store_url: str, tmp_path: Path
) -> None:
    """Killed after an idempotent call returned (its ``done`` record written) and before the
    step's checkpoint: the resumed run finds it done and answers it with what it returned, in
    another process; the tool does not run again (it was given its key once)."""
    file = tmp_path / "ledger.txt"
    spec = {"tools": "append", "script": "record", "file": str(file)}
    with children(tmp_path) as kids:
        first = kids.start(store_url, "rec", "run", block=in_execute(kids, "finished"), **spec)
        first.wait_for(kids.path("inside"))
        first.kill()
        out = kids.start(store_url, "rec", "resume", **spec).result()
    assert out["stop_reason"] == "success"
    assert [entry["action"]["name"] for entry in out["history"]] == ["record_line"]
    (key,) = keys(file)
    assert re.fullmatch(r"[0-9a-f]{24}", key)


def test_an_answer_for_a_thread_that_is_not_waiting_is_refused(
    store_url: str, tmp_path: Path
) -> None:
    """A stale or repeated approval must not approve a question nobody has seen yet."""
    file = tmp_path / "payments.txt"
    spec = {"tools": "append", "script": "append", "file": str(file), "policy": APPROVE_APPEND}
    with children(tmp_path) as kids:
        kids.start(store_url, "pay", "run", **spec).result()
        killed_inside_the_call(tmp_path, store_url, "resume", answer={"approved": True}, **spec)
        repeated = kids.start(store_url, "pay", "resume", answer={"approved": True}, **spec)
        refused = repeated.outcome()
        again = kids.start(store_url, "pay", "resume", **spec).result()
    assert "not waiting for an answer" in refused["error"]
    assert again["pending"][0]["kind"] == "outcome_unknown"
    assert len(lines(file)) == 1


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_kill_while_the_gates_checkpoint_is_written_repeats_nothing(
    store_url: str, tmp_path: Path, durability: str
) -> None:
    """The gate's checkpoint is still being written when the process dies. With ``"sync"``
    durability nothing ran yet: the resumed run pays once. With LangGraph's default
    (``"async"``) execute has run the tool by then, and the process dies after it returned or
    still inside it: before, the resumed run paid again, unless build_graph forced sync
    durability for side-effecting tools; now the record holds the payment, done (the model is
    shown what it returned) or started (its outcome is unknown), and it is never made twice."""
    file = tmp_path / "payments.txt"
    spec = {"tools": "append", "script": "append", "file": str(file)}
    with children(tmp_path) as kids:
        hung = kids.path("gate-checkpoint-hangs")
        first = kids.start(store_url, "pay", "run", slow_put=hung, durability=durability, **spec)
        first.wait_for(hung)
        if durability == "async":
            first.wait_until(lambda: len(lines(file)) == 1)
        first.kill()
        assert len(lines(file)) == (1 if durability == "async" else 0)
        out = kids.start(store_url, "pay", "resume", **spec).result()
    ends = {"success"} if durability == "sync" else {"success", "tool_outcome_unknown:append_line"}
    assert out["stop_reason"] in ends
    assert len(lines(file)) == 1


def test_an_outcome_stored_before_the_crash_is_not_unknown(store_url: str, tmp_path: Path) -> None:
    """Killed after LangGraph stored execute's writes but before the next checkpoint: the
    resumed run takes the stored outcome instead of calling it unknown or running it again."""
    file = tmp_path / "payments.txt"
    spec = {"tools": "append", "script": "append", "file": str(file)}
    with children(tmp_path) as kids:
        saved = kids.path("outcome-saved")
        first = kids.start(store_url, "pay", "run", hang_after_outcome=saved, **spec)
        first.wait_for(saved)
        first.kill()
        with open_checkpointer(store_url) as saver:
            latest = saver.get_tuple({"configurable": {"thread_id": "pay"}})
        assert latest is not None
        held = latest.checkpoint["channel_values"]["step"]["calls"]
        assert "outcome" not in held[0]  # the gate's step
        steps = [v for _, ch, v in latest.pending_writes or () if ch == "step"]
        assert [step["calls"][0]["outcome"]["ok"] for step in steps] == [True]  # execute's
        out = kids.start(store_url, "pay", "resume", **spec).result()
    assert out["stop_reason"] == "success"
    assert [entry["observation"] for entry in out["history"]] == ["appended"]
    assert len(lines(file)) == 1
