"""Instructions per step, counted: ``python -m benchmarks.instructions [--base SRC] ...``.

A timed step on a shared machine moves by 20% or more between runs; the instructions a run
executes barely do (valgrind's cachegrind counts them, every thread's; see below). Each figure
is two child processes under ``valgrind --tool=cachegrind``: one builds the runtime, warms it up
with a 3-step run, builds it again and runs it for N steps; the other does the same but never
runs the second graph. Their difference over N is what a step costs, without imports, warm-up
or the build (as the timed benchmarks leave the build out). The floor and ``create_agent`` are
counted in the same run, so every ratio is of counts side by side. ``--base`` counts ours from
another ``src`` folder too (the version before: ``git archive main src | tar -x -C
/tmp/base``), ``--head`` from a third instead of the installed one (so the tree can change
while it counts). Slow: a 300-step run takes minutes under valgrind.

The threads of a run (LangGraph's background writes, the calls' worker threads) are scheduled
in turn (valgrind's ``--fair-sched=yes``): otherwise how they interleave, and what their waits
cost, follows the machine's load, and the floor's count moved by 5% between quiet runs (9.44
to 9.96 M a step in memory) and to 7.3 M beside the test suite. In turn, counts of a memory
run agree to within 0.3% under a load of 4 on two cores; SQLite's, which wait on the file
system, to within 5%. ``--repeat N`` takes the median of N counts of each figure.

Both children collect the garbage once after the warm-up: the objects the imports and the build
left to the collector are then not what a long enough run's first full collection counts, and
charges to its steps (measured: at 300 steps in memory, one full collection of 53 M
instructions came at step 271 of ours, 0.18 M a step, where the floor had none; on SQLite the
floor had one and ours none). What each step leaves to the collector still counts: a run long
enough collects as often as its steps keep objects.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.report import _table

_CHILD = """
import gc, sys
from benchmarks.common import build
from benchmarks.run_length import one
from benchmarks.stores import saver
peer, steps, (store, durability, call) = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(":")
one(peer, 3, store, durability, call)
gc.collect()  # the imports' objects are the collector's to count here, not the steps' (see above)
if steps:
    one(peer, steps, store, durability, call)
else:
    with saver(store) as checkpointer:
        build(peer, 3, checkpointer)
"""


GRIND = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--fair-sched=yes")
"""Cachegrind counting instructions only, the threads run in turn (see above)."""


def instructions_of(command: list[str], env: dict[str, str]) -> int:
    """The instructions ``command`` executes, every thread's, under ``GRIND``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [*GRIND, f"--cachegrind-out-file={tmp}/out", *command],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output: {out.stderr[-500:]}")
    return int(found.group(1).replace(",", ""))


def count(src: str | None, peer: str, steps: int, config: str) -> int:
    """Instructions of one child process (``steps`` 0: built, never run)."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join([p for p in (src, root) if p])
    return instructions_of([sys.executable, "-c", _CHILD, peer, str(steps), config], env)


def counted(src: str | None, peer: str, steps: int, config: str, repeat: int) -> float:
    """The median of ``repeat`` counts (see the module's doc: a loaded machine moves them)."""
    return statistics.median(count(src, peer, steps, config) for _ in range(max(repeat, 1)))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__)
    parser.add_argument("--base", help="the src folder of the version before")
    parser.add_argument("--head", help="the src folder of the version after (default: installed)")
    parser.add_argument("--config", nargs="*", default=["memory:async:invoke"])
    parser.add_argument("--steps", type=int, nargs="*", default=[10, 30, 100, 300])
    parser.add_argument("--repeat", type=int, default=1, help="counts per figure (the median)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    versions = [("after", args.head)]
    if args.base:
        versions.insert(0, ("before", args.base))
    rows = []
    peers = [*versions, ("floor", None), ("create_agent", None)]
    for config in args.config:
        per_step: dict[tuple[str, str, int], float] = {}
        for version, src in peers:
            peer = version if version in ("floor", "create_agent") else "ours"
            built = counted(src, peer, 0, config, args.repeat)
            for steps in args.steps:
                ran = counted(src, peer, steps, config, args.repeat)
                per_step[version, config, steps] = (ran - built) / steps
        for steps in args.steps:
            floor = per_step["floor", config, steps]
            agent = per_step["create_agent", config, steps]
            for version, _ in versions:
                ours = per_step[version, config, steps]
                rows.append(
                    [config, steps, version, f"{ours / 1e6:.2f}", f"{floor / 1e6:.2f}",
                     f"{agent / 1e6:.2f}", round(ours / floor, 3), round(ours / agent, 3)]
                )  # fmt: skip
    header = ["config", "steps", "version", "ours M/step", "floor M/step", "create_agent M/step",
              "ours/floor", "ours/create_agent"]  # fmt: skip
    print(_table("Instructions per step (millions, cachegrind)", header, rows))


if __name__ == "__main__":
    main()
