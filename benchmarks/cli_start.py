"""6. CLI start: ``gated-react --help``, and ``gated-react runs`` on a store of 1,000 refund runs
(4 steps and 17 checkpoints each), SQLite and, when configured, Postgres. Each command is a fresh
process, as a user runs it."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import timed
from benchmarks.stores import postgres_url

CLI = str(Path(sys.executable).with_name("gated-react"))
REFUND = "refund #{} for user 42?"


def fill(url: str, runs: int) -> None:
    """``runs`` finished refund runs in the store at ``url`` (kept if already there)."""
    from gated_react import build_graph, open_checkpointer, run
    from gated_react.records.run_listing import latest_runs
    from gated_react.testing import ScriptedChatModel, call
    from gated_react.tools.support import SUPPORT_TOOLS

    replies = [
        call("get_user_profile", user_id=42),
        call("get_user_billing", user_id=42),
        call("search_policy", query="refund pro monthly"),
        "Yes: USD 49.00 within the 14-day window.",
    ]
    with open_checkpointer(url) as saver:
        have = latest_runs(saver, 1)[1]
        model = ScriptedChatModel(replies=replies, cycle=True)
        graph = build_graph(model, SUPPORT_TOOLS, checkpointer=saver)
        for i in range(have, runs):
            run(graph, REFUND.format(i))


def _times(args: list[str], env: dict[str, str], reps: int) -> dict[str, float]:
    samples = [
        timed(lambda: subprocess.run([CLI, *args], env=env, check=True, capture_output=True))[0]
        for _ in range(reps)
    ]
    return {
        "median": round(statistics.median(samples), 3),
        "min": round(min(samples), 3),
        "max": round(max(samples), 3),
    }


def measure(quick: bool) -> dict[str, Any]:
    runs, reps = (100, 3) if quick else (1000, 7)
    result: dict[str, Any] = {"store_runs": runs}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_STATE_HOME": tmp, "GATED_REACT_DB": str(Path(tmp) / "r.sqlite")}
        env.pop("OPENAI_API_KEY", None)
        result["help_s"] = _times(["--help"], env, reps)
        fill(env["GATED_REACT_DB"], runs)
        result["runs_sqlite_s"] = _times(["runs", "--limit", "20"], env, reps)
        url = postgres_url()
        if url and not quick:
            fill(url, runs)
            result["runs_postgres_s"] = _times(
                ["runs", "--limit", "20"], {**env, "GATED_REACT_DB": url}, reps
            )
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return result
