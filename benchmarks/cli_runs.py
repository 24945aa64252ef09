"""How fast ``gated-react runs`` and ``gated-react --help`` are on a big store.

    .venv/bin/python benchmarks/cli_runs.py [--runs 1000] [--db URL]

Fills a store (SQLite by default; any --db URL, postgresql:// included) with N finished refund
runs (scripted model, 4 steps and 17 checkpoints each) unless it already holds them, then
times each command as a fresh process (best of 5).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from gated_react import build_graph, open_checkpointer, run
from gated_react.cli.listing import latest_runs
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

REPLIES = [
    call("get_user_profile", user_id=42),
    call("get_user_billing", user_id=42),
    call("search_policy", query="refund pro monthly"),
    "Yes: USD 49.00 within the 14-day window.",
]
CLI = str(Path(sys.executable).with_name("gated-react"))


def fill(db: str, runs: int) -> None:
    with open_checkpointer(db) as saver:
        have = latest_runs(saver, 1)[1]
        graph = build_graph(
            ScriptedChatModel(replies=REPLIES, cycle=True), SUPPORT_TOOLS, checkpointer=saver
        )
        started = time.perf_counter()
        for i in range(have, runs):
            run(graph, f"refund #{i} for user 42?")
        if runs > have:
            print(f"filled {runs - have} runs in {time.perf_counter() - started:.1f} s")


def best(args: list[str], env: dict[str, str], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([CLI, *args], env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--db", default="/tmp/gated-react-bench/runs.sqlite")
    opts = parser.parse_args()
    fill(opts.db, opts.runs)
    env = {**os.environ, "GATED_REACT_DB": opts.db}
    size = Path(opts.db).stat().st_size / 1e6 if Path(opts.db).is_file() else 0.0
    print(f"store: {opts.runs} runs" + (f", {size:.1f} MB" if size else ""))
    print(f"gated-react --help          {best(['--help'], env):.3f} s")
    print(f"gated-react runs            {best(['runs'], env):.3f} s")
    print(f"gated-react runs --limit 200 {best(['runs', '--limit', '200'], env):.3f} s")


if __name__ == "__main__":
    main()
