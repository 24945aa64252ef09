"""Framework CPU per step of this tree against another source tree, side by side in one run.

    python -m benchmarks.versus /path/to/other/src [--steps 50] [--rounds 7] [--store memory]

Each round runs the ``ours`` peer of ``step_time`` (one tool, no new feature used) once in a
fresh process per tree, the two trees alternating, so load on the machine hits both alike;
each process warms up, then times ``--reps`` runs and reports its median. Prints the median of
the rounds per tree and their ratio (this tree / the other), and the same for the fastest
round (what a loaded machine disturbs least).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_MEASURE = """
import json, statistics, sys, uuid
from benchmarks.common import build, run_input, timed
from benchmarks.stores import saver
steps, reps, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def one(n):
    with saver(store) as checkpointer:
        graph = build("ours", n, checkpointer)
        config = {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": 100_000}
        return timed(lambda: graph.invoke(run_input("ours"), config))[1] / n
one(5)
print(json.dumps(statistics.median(one(steps) for _ in range(reps)) * 1e3))
"""


def _cpu_ms(src: Path, steps: int, reps: int, store: str) -> float:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{REPO}", "LANGSMITH_TRACING": "false"}
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(steps), str(reps), store],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("other", type=Path, help="the other tree's src/ folder")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--store", default="none", choices=("none", "memory", "sqlite"))
    args = parser.parse_args()
    trees = {"this": REPO / "src", "other": args.other.resolve()}
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, src in trees.items():
            cpu[name].append(_cpu_ms(src, args.steps, args.reps, args.store))
    medians = {name: statistics.median(values) for name, values in cpu.items()}
    lows = {name: min(values) for name, values in cpu.items()}
    print(
        json.dumps(
            {
                "steps": args.steps,
                "store": args.store,
                "cpu_ms_per_step": {k: round(v, 3) for k, v in medians.items()},
                "rounds": {k: [round(x, 3) for x in v] for k, v in cpu.items()},
                "ratio_this_over_other": round(medians["this"] / medians["other"], 3),
                "min_cpu_ms_per_step": {k: round(v, 3) for k, v in lows.items()},
                "ratio_of_mins": round(lows["this"] / lows["other"], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
