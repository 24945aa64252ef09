"""Crash-safe side effects with real kills: a tool that appends a line to a file never runs twice
unless it says it may, and the idempotency key it gets is stable across the crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gated_react import open_checkpointer
from gated_react._engine.call_keys import canonical_json, short_hash

from ..support.procs import children
from ..support.scenarios import lines

APPROVE_APPEND = {"require_approval": ["append_line"]}
TEXT = "refund 42: USD 49"


def expected_key(thread: str, tool: str, file: Path) -> str:
    """The key the gate derives: thread, step 1, tool and canonical arguments."""
    args = {"path": str(file), "text": TEXT}
    return short_hash(f"{thread}:1:{tool}:{canonical_json(args)}", 24)


def in_execute(kids: Any, phase: str) -> dict[str, Any]:
    return {"node": "execute", "phase": phase, "marker": kids.path("inside")}


@pytest.mark.parametrize(("phase", "before"), [("entered", 0), ("finished", 1)])
def test_a_non_idempotent_call_is_never_repeated_after_a_kill(
    store_url: str, tmp_path: Path, phase: str, before: int
) -> None:
    file = tmp_path / "payments.txt"
    spec = {"tools": "append", "script": "append", "file": str(file)}
    with children(tmp_path) as kids:
        first = kids.start(store_url, "pay", "run", block=in_execute(kids, phase), **spec)
        first.wait_for(kids.path("inside"))
        first.kill()
        assert len(lines(file)) == before
        out = kids.start(store_url, "pay", "resume", **spec).result()
    assert out["stop_reason"] == "tool_outcome_unknown:append_line"
    assert "outcome is unknown" in out["message"]
    # what to do next, and the key to look for (before: neither)
    key = expected_key("pay", "append_line", file)
    assert f"look up idempotency key {key} in the system append_line talks to" in out["message"]
    assert "send a follow-up on this thread" in out["message"]
    assert out["trace"][-1]["stop_reason"] == "tool_outcome_unknown:append_line"
    assert out["history"] == []
    assert lines(file) == [f"{TEXT} key={expected_key('pay', 'append_line', file)}"] * before


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
        block = in_execute(kids, "finished")
        approving = kids.start(
            store_url, "pay", "resume", answer={"approved": True}, **spec, block=block
        )
        approving.wait_for(kids.path("inside"))
        approving.kill()
        assert len(lines(file)) == 1
        again = kids.start(store_url, "pay", "resume", **spec).result()
        question = again["pending"][0]
        assert question["kind"] == "outcome_unknown"
        assert question["tool"] == "append_line"
        assert "may already have run" in question["why"]
        out = kids.start(store_url, "pay", "resume", answer=answer, **spec).result()
    assert out["stop_reason"].startswith(stop_reason)
    assert len(lines(file)) == count


def test_an_idempotent_tool_is_run_again_with_the_same_key(store_url: str, tmp_path: Path) -> None:
    file = tmp_path / "ledger.txt"
    spec = {"tools": "append", "script": "record", "file": str(file)}
    with children(tmp_path) as kids:
        first = kids.start(store_url, "rec", "run", block=in_execute(kids, "finished"), **spec)
        first.wait_for(kids.path("inside"))
        first.kill()
        out = kids.start(store_url, "rec", "resume", **spec).result()
    assert out["stop_reason"] == "success"
    assert [entry["action"]["name"] for entry in out["history"]] == ["record_line"]
    key = expected_key("rec", "record_line", file)
    assert lines(file) == [f"{TEXT} key={key}"] * 2  # the same key both times: a server can dedupe


def test_an_answer_for_a_thread_that_is_not_waiting_is_refused(
    store_url: str, tmp_path: Path
) -> None:
    """A stale or repeated approval must not approve a question nobody has seen yet."""
    file = tmp_path / "payments.txt"
    spec = {"tools": "append", "script": "append", "file": str(file), "policy": APPROVE_APPEND}
    with children(tmp_path) as kids:
        kids.start(store_url, "pay", "run", **spec).result()
        block = in_execute(kids, "finished")
        approving = kids.start(
            store_url, "pay", "resume", answer={"approved": True}, **spec, block=block
        )
        approving.wait_for(kids.path("inside"))
        approving.kill()
        repeated = kids.start(store_url, "pay", "resume", answer={"approved": True}, **spec)
        refused = repeated.outcome()
        again = kids.start(store_url, "pay", "resume", **spec).result()
    assert "not waiting for an answer" in refused["error"]
    assert again["pending"][0]["kind"] == "outcome_unknown"
    assert len(lines(file)) == 1


@pytest.mark.parametrize(("durability", "count"), [("async", 2), (None, 1)])
def test_sync_durability_closes_the_window_between_gate_and_execute(
    store_url: str, tmp_path: Path, durability: str | None, count: int
) -> None:
    """The gate's record of the call is still being written when the process dies. With
    LangGraph's async durability execute has already run the tool by then, and the resumed run
    repeats it; with the sync durability build_graph picks for side-effecting tools it has not."""
    file = tmp_path / "payments.txt"
    spec = {"tools": "append", "script": "append", "file": str(file)}
    with children(tmp_path) as kids:
        hung = kids.path("gate-checkpoint-hangs")
        first = kids.start(store_url, "pay", "run", slow_put=hung, durability=durability, **spec)
        first.wait_for(hung)
        if durability == "async":
            first.wait_until(lambda: len(lines(file)) == 1)
        first.kill()
        assert len(lines(file)) == count - 1
        out = kids.start(store_url, "pay", "resume", **spec).result()
    assert out["stop_reason"] == "success"
    assert len(lines(file)) == count


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
        assert latest.checkpoint["channel_values"]["calls"][0]["outcome"] is None  # gate's record
        outcomes = [v for _, ch, v in latest.pending_writes or () if ch == "calls"]
        assert [calls[0]["outcome"]["ok"] for calls in outcomes] == [True]  # execute's, pending
        out = kids.start(store_url, "pay", "resume", **spec).result()
    assert out["stop_reason"] == "success"
    assert [entry["observation"] for entry in out["history"]] == ["appended"]
    assert len(lines(file)) == 1
