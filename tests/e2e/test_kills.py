"""SIGKILL inside each node, then resume in a new process: the result equals an uninterrupted
run's, with no step lost or doubled. On a real SQLite file and on Postgres."""

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
    assert comparable(resumed) == comparable(expected)
    assert [entry["step"] for entry in resumed["history"]] == [1, 2, 3]
