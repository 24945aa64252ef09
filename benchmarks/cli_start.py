"""6. CLI start: ``gated-react --help`` and ``gated-react runs`` on a store with 1,000 runs."""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ScriptModel, build_with, run_input


def _cli() -> list[str]:
    found = shutil.which("gated-react", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "gated_react.cli"]


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one CLI process."""
    started = time.perf_counter()
    subprocess.run([*_cli(), *args], env=env, capture_output=True, check=True, timeout=120)
    seconds = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, peak_kb / 1024


def seed(path: Path, runs: int) -> None:
    from gated_react import open_checkpointer

    with open_checkpointer(str(path)) as saver:
        for i in range(runs):
            graph = build_with(ScriptModel(steps=1), "ours", 1, saver)
            graph.invoke(run_input("ours"), {"configurable": {"thread_id": f"run-{i:04d}"}})


def measure(quick: bool) -> dict[str, Any]:
    runs = 100 if quick else 1000
    reps = 3 if quick else 7
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "runs.sqlite"
        seed(store, runs)
        env = {**os.environ, "GATED_REACT_DB": str(store), "XDG_STATE_HOME": tmp}
        help_times = [_timed(["--help"], env)[0] for _ in range(reps)]
        runs_times = [_timed(["runs", "--limit", "20"], env)[0] for _ in range(reps)]
        peak = _timed(["runs", "--limit", "20"], env)[1]
    return {
        "store_runs": runs,
        "help_s": {
            "median": round(statistics.median(help_times), 3),
            "min": round(min(help_times), 3),
            "max": round(max(help_times), 3),
        },
        "runs_s": {
            "median": round(statistics.median(runs_times), 3),
            "min": round(min(runs_times), 3),
            "max": round(max(runs_times), 3),
        },
        "peak_rss_mb_max_of_children": round(peak, 1),
    }
