"""Soak: many runs back to back in one process on a SQLite store; nothing grows, nothing drifts.

Each run opens the store, builds the graph and runs the same scripted scenario (two lookups, a
denied call the model is shown, a calculation, a policy search, the answer) on a new thread, the
way a CLI invocation or a request handler would. CI runs ``GATED_REACT_SOAK_RUNS`` (default 300);
the full size is 1000: ``GATED_REACT_SOAK_RUNS=1000 pytest -m slow tests/reliability``.
"""

from __future__ import annotations

import gc
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gated_react import Budget, Policy, build_graph, open_checkpointer, run
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.calculator import calculate
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.scenarios import comparable
from . import tally
from .kit import DELETED, Executions, counted, delete_account, fd_count, rss_mb

SOAK_RUNS = int(os.environ.get("GATED_REACT_SOAK_RUNS", "300"))
SCRIPT = [
    call("get_user_profile", user_id=42),
    call("get_user_billing", user_id=42),
    call("delete_account", user_id=42),
    call("calculate", expression="49 * 1"),
    call("search_policy", query="refund pro monthly"),
    "Yes: Anna's Pro plan was paid 10 days ago, within 14 days; refund USD 49.",
]
POLICY = Policy(
    budget=Budget(max_steps=8, max_tool_calls=6),
    allow=frozenset({"get_user_profile", "get_user_billing", "search_policy", "calculate"}),
    on_tool_error="observe",
)
# Growth allowed after the two warm-up runs, whatever the number of runs (measured: 1 object):
# a leak of one object per run shows from 200 runs on; the RSS bound, 25 KB per run at 1000.
MAX_NEW_OBJECTS = 200
MAX_RSS_GROWTH_MB = 25.0


def outcome(out: dict[str, Any]) -> dict[str, Any]:
    """Everything a run reports except its thread id, the seconds it took and the ids of its
    chat messages."""
    return comparable(out)


def one_run(url: str, number: int, executions: Executions) -> dict[str, Any]:
    tools = counted([*SUPPORT_TOOLS, calculate, delete_account], executions)
    with open_checkpointer(url) as saver:
        graph = build_graph(
            ScriptedChatModel(replies=SCRIPT), tools, policy=POLICY, checkpointer=saver
        )
        return outcome(run(graph, "User 42: refund now?", thread_id=f"soak-{number}"))


def live_objects() -> Counter[str]:
    """Objects the collector tracks, by type name."""
    gc.collect()
    return Counter(type(o).__qualname__ for o in gc.get_objects())


@pytest.mark.slow
def test_soak_runs_stay_flat_and_identical(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/soak.sqlite"
    executions = Executions()
    first = one_run(url, 0, executions)  # warm-up: imports, caches, the store's lock file
    assert first["stop_reason"] == "success"
    assert [t["tool"] for t in first["trace"]] == [
        "get_user_profile",
        "get_user_billing",
        "delete_account",
        "calculate",
        "search_policy",
    ]
    assert one_run(url, 1, executions) == first  # lazily built caches fill on the second run
    # collected first: garbage earlier tests in this worker left (connections in cycles) would
    # otherwise count as open here and be closed during the soak
    objects = live_objects()
    fds, threads = fd_count(), threading.active_count()
    rss = [round(rss_mb(), 1)]
    deleted = len(DELETED)
    for number in range(2, SOAK_RUNS):
        assert one_run(url, number, executions) == first, f"run {number} differs from the first"
        if number % 100 == 0:
            rss.append(round(rss_mb(), 1))
    gained = live_objects() - objects
    new_objects = gained.total()
    rss.append(round(rss_mb(), 1))
    tally.record("soak RSS MB (after warm-up, every 100 runs, end)", rss)
    tally.count("soak runs", SOAK_RUNS)
    tally.count("soak tool executions checked", executions.total)
    tally.record("soak live objects gained", new_objects)
    assert executions.total == 4 * SOAK_RUNS  # four allowed calls per run, not one more
    assert len(DELETED) == deleted
    assert fd_count() == fds, "file descriptors leaked"
    assert threading.active_count() <= threads, "threads leaked"
    assert new_objects < MAX_NEW_OBJECTS, (
        f"{new_objects} objects outlived {SOAK_RUNS} runs: {gained.most_common(8)}"
    )
    settled = rss[1] if len(rss) > 2 else rss[0]  # the allocator settles in the first 100
    assert rss[-1] - settled < MAX_RSS_GROWTH_MB, rss
