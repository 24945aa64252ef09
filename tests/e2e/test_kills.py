"""SIGKILL inside each node, then resume in a new process: the result equals an uninterrupted
run's, with no step lost or doubled. On a real SQLite file and on Postgres.

One difference is the record's: a process killed after the model answered (inside ``decide``,
its reply paid but not stored) has spent that call, and the resumed run asks again. Its usage
counts both, as the provider billed both (before issue 43 the first was left out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import open_checkpointer, read, run

from ..support.helpers import REFUND_GOAL
from ..support.procs import children
from ..support.scenarios import comparable, graph_for

NODES = ["decide", "validate", "gate", "execute", "observe"]


def uninterrupted(**spec: Any) -> dict[str, Any]:
    return run(graph_for(spec, InMemorySaver()), REFUND_GOAL, thread_id="reference")


def stored(url: str, thread: str) -> dict[str, Any]:
    with open_checkpointer(url) as saver:
        return read(graph_for({}, saver), thread)


@pytest.mark.parametrize(
    ("phase", "mode"), [("entered", "sync"), ("finished", "sync"), ("finished", "async")]
)
@pytest.mark.parametrize("node", NODES)
def test_a_run_killed_inside_a_node_resumes_to_the_same_result(
    store_url: str, tmp_path: Path, node: str, phase: str, mode: str
) -> None:
    """``entered``: killed as the node starts; ``finished``: after its body and router ran
    (model called, tool run) but before LangGraph stored what it wrote."""
    expected = uninterrupted()
    with children(tmp_path) as kids:
        marker = kids.path("inside")
        block = {"node": node, "phase": phase, "occurrence": 2, "marker": marker}
        first = kids.start(store_url, "refund-42", "run", block=block, mode=mode)
        first.wait_for(marker)
        first.kill()
        crashed = stored(store_url, "refund-42")
        assert crashed["status"] is None
        assert 1 <= len(crashed["history"]) <= 2
        resumed = kids.start(store_url, "refund-42", "resume", mode=mode).result()
    assert expected["stop_reason"] == "success"
    repaid = 1 if (node, phase) == ("decide", "finished") else 0
    assert resumed["usage"]["steps"] == expected["usage"]["steps"] + repaid
    assert resumed["message"] == f"final answer after {resumed['usage']['steps']} steps"
    assert _calls(resumed) == _calls(expected)
    assert [entry["step"] for entry in resumed["history"]] == [1, 2, 3]
    assert _without(comparable(resumed), repaid) == _without(comparable(expected), repaid)


def _calls(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The trace without its step numbers (the record's count of model calls, which a paid
    call lost in a crash moves on by one)."""
    return [(t["tool"], t["args_hash"], t["ok"], t.get("stop_reason")) for t in result["trace"]]


PAID = ("steps", "tokens", "input_tokens", "output_tokens", "estimated_tokens")
"""What a model call paid before a kill adds to a run's usage."""


def _without(result: dict[str, Any], repaid: int) -> dict[str, Any]:
    """The result but for what is checked apart: the trace's steps, the message's count of
    steps, and (after a paid call lost in a kill) what the model calls spent."""
    usage = {k: v for k, v in result["usage"].items() if not (repaid and k in PAID)}
    return {**{k: v for k, v in result.items() if k not in ("trace", "message")}, "usage": usage}
