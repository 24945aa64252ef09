"""4. Concurrency: many runs at once with ``ainvoke`` on one event loop and an async store.

Each runtime is measured in its own subprocess so its peak memory is its own.
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import ratio, run_input
from benchmarks.stores import postgres_url

PEERS = ("ours", "create_agent", "create_react_agent", "floor")


async def _batch(peer: str, store: str, runs: int, steps: int) -> dict[str, Any]:
    from benchmarks.common import ScriptModel, build_with
    from gated_react.store.checkpointer import aopen_checkpointer

    with tempfile.TemporaryDirectory() as tmp:
        url = postgres_url() if store == "postgres" else str(Path(tmp) / "runs.sqlite")
        async with aopen_checkpointer(url or "memory") as saver:
            # one graph for all runs, as a server has: the scripted model reads each run's progress
            graph = build_with(ScriptModel(steps=steps, stateless=True), peer, steps, saver)
            base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            started = time.perf_counter()
            results = await asyncio.gather(
                *(
                    graph.ainvoke(
                        run_input(peer),
                        {
                            "configurable": {"thread_id": uuid.uuid4().hex},
                            "recursion_limit": 10_000,
                        },
                        durability="async",
                    )
                    for _ in range(runs)
                )
            )
            seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "runs": len(results),
        "seconds": round(seconds, 3),
        "runs_per_second": round(len(results) / seconds, 1),
        "peak_rss_mb": round(peak / 1024, 1),
        "rss_growth_mb": round((peak - base) / 1024, 1),
    }


def _child(peer: str, store: str, runs: int, steps: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.concurrency", peer, store, str(runs), str(steps)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure(quick: bool) -> list[dict[str, Any]]:
    runs, steps = (50, 5) if quick else (200, 10)
    stores = ["sqlite"] + (["postgres"] if postgres_url() and not quick else [])
    rows = []
    for store in stores:
        row: dict[str, Any] = {"store": store, "runs": runs, "steps": steps}
        for peer in PEERS:
            row[peer] = _child(peer, store, runs, steps)
        for peer in PEERS[1:]:
            ours, other = row["ours"], row[peer]
            if "error" not in ours and "error" not in other:
                row[f"ratio_vs_{peer}"] = {
                    "runs_per_second": ratio(ours["runs_per_second"], other["runs_per_second"]),
                    "peak_rss": ratio(ours["peak_rss_mb"], other["peak_rss_mb"]),
                }
        rows.append(row)
    return rows


if __name__ == "__main__":
    peer_, store_, runs_, steps_ = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(asyncio.run(_batch(peer_, store_, runs_, steps_))))
