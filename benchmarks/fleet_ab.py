"""A fleet before and after: ``python -m benchmarks.fleet_ab BASE_SRC [--rounds N]``.

Runs the fleet benchmark (``fleet``: one private cluster, a model answering in 0.5 s, the pay
runs) for two versions of gated-react in alternating subprocesses (base, head, base, head,
...), so both share the machine's load round by round; ``BASE_SRC`` is the ``src`` folder of
the version before, ``--head`` the version after (default: this tree's). Each row is the
median of the rounds' runs/s and of their fraction of the ideal (workers x concurrency / 1.5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.report import _table

_CHILD = (
    "import json, sys; from benchmarks import fleet as f; "
    "f.FLEETS = [tuple(x) for x in json.loads(sys.argv[1])]; "
    "print(json.dumps(f.measure(False)))"
)
ROOT = Path(__file__).resolve().parent.parent


def _round(src: str, fleets: list[list[int]]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(ROOT)])}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(fleets)],
        env=env,
        capture_output=True,  # the workers' log lines go to stderr, unread
        text=True,
        check=True,
        timeout=3600,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet_ab", description=__doc__)
    parser.add_argument("base", help="the src folder of the version before")
    parser.add_argument("--head", default=str(ROOT / "src"), help="the src folder after")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fleets", nargs="*", default=["1:1", "1:8", "1:32"])
    args = parser.parse_args()
    fleets = [[int(n) for n in spec.split(":")] for spec in args.fleets]
    seen: dict[tuple[str, int, int], list[tuple[float, float]]] = {}
    loads: list[float] = []
    for _ in range(args.rounds):
        for version, src in (("before", args.base), ("after", args.head)):
            result = _round(src, fleets)
            loads += result["load_average"]
            for row in result["rows"]:
                key = (version, row["workers"], row["concurrency"])
                seen.setdefault(key, []).append((row["runs_per_s"], row["of_ideal"]))
    rows = []
    for (version, workers, concurrency), got in sorted(seen.items(), key=lambda kv: kv[0][1:]):
        rows.append(
            [
                workers,
                concurrency,
                version,
                f"{statistics.median(r for r, _ in got):.2f}",
                f"{statistics.median(o for _, o in got):.2f}",
                " / ".join(f"{o:.2f}" for _, o in got),
            ]
        )
    title = (
        f"fleet before/after, medians of {args.rounds} rounds, "
        f"load average {min(loads):.1f} to {max(loads):.1f}"
    )
    header = ["workers", "concurrency", "version", "runs/s", "of ideal", "each round"]
    print(_table(title, header, rows))


if __name__ == "__main__":
    main()
