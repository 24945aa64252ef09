"""Before and after in one run: ``python -m benchmarks.ab BASE_SRC [--rounds N] [--steps ...]``.

Times the run-length series (``run_length``) for two versions of gated-react, in alternating
subprocesses (base, head, base, head, ...): ``BASE_SRC`` is the ``src`` folder of the version
before (``git archive main src | tar -x -C /tmp/base``), head the installed one. Each process
measures ours, the floor and ``create_agent`` interleaved, so every ratio is of figures taken
in the same process, and the two versions share the machine's load round by round. ``--head``
names the version after's ``src`` too (default: the installed one), so the tree can change
while it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import Stat, ratio
from benchmarks.report import _table

_CHILD = (
    "import json, sys; from benchmarks import run_length as r; "
    "r.CONFIGS_FULL = [tuple(c) for c in json.loads(sys.argv[1])]; "
    "r.STEPS_FULL = tuple(json.loads(sys.argv[2])); "
    "print(json.dumps(r.measure(False, reps=1)))"
)


def _round(src: str | None, configs: list[Any], steps: list[int]) -> list[dict[str, Any]]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([p for p in (src, root) if p])
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(configs), json.dumps(steps)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__)
    parser.add_argument("base", help="the src folder of the version before")
    parser.add_argument("--head", help="the src folder of the version after (default: installed)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, nargs="*", default=[10, 30, 100, 300])
    parser.add_argument("--config", nargs="*", default=["memory:async:invoke"])
    args = parser.parse_args()
    configs = [c.split(":") for c in args.config]
    samples: dict[tuple[str, str, int, str], list[float]] = {}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for version, src in (("before", args.base), ("after", args.head)):
            for row in _round(src, configs, args.steps):
                where = f"{row['store']}/{row['durability']}/{row['call']}"
                for peer in ("ours", "floor", "create_agent"):
                    if peer in row:
                        key = (version, where, row["steps"], peer)
                        samples.setdefault(key, []).append(row[peer]["cpu_ms_per_step"]["median"])
        loads.append(os.getloadavg()[0])
    rows = []
    for version, where, steps, peer in sorted(samples):
        if peer != "ours":
            continue
        ours = Stat.of(samples[(version, where, steps, "ours")]).median
        floor = Stat.of(samples[(version, where, steps, "floor")]).median
        ca = samples.get((version, where, steps, "create_agent"))
        ca_med = Stat.of(ca).median if ca else None
        rows.append(
            [
                where,
                steps,
                version,
                f"{ours:.2f}",
                f"{floor:.2f}",
                f"{ca_med:.2f}" if ca_med else "-",
                ratio(ours, floor),
                ratio(ours, ca_med) if ca_med else "-",
            ]
        )
    title = (
        f"before/after, median CPU ms per step of {args.rounds} rounds (one run each per round), "
        f"load average {min(loads):.1f} to {max(loads):.1f}"
    )
    header = ["config", "steps", "version", "ours", "floor", "create_agent", "/floor", "/ca"]
    print(_table(title, header, rows))


if __name__ == "__main__":
    main()
