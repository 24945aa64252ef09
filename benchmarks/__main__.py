"""``python -m benchmarks [--quick] [--only NAME ...]``: every comparison, one table, one JSON."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import (
    cli_start,
    concurrency,
    fleet,
    prefix_cache,
    report,
    resume,
    run_length,
    step_time,
    storage,
    store_key,
    tokens,
    tracing,
)

SUITES = {
    "step_time": step_time.measure,
    "run_length": run_length.measure,
    "tokens": tokens.measure,
    "storage": storage.measure,
    "concurrency": concurrency.measure,
    "resume": resume.measure,
    "cli_start": cli_start.measure,
    "prefix_cache": prefix_cache.measure,
    "tracing": tracing.measure,
    "fleet": fleet.measure,
    "store_key": store_key.measure,
}
RESULTS = Path(__file__).parent / "results"


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    packages = subprocess.run(
        [sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    wanted = ("langgraph==", "langchain==", "langchain-core==", "langgraph-checkpoint-sqlite==")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": load,
        "versions": [p for p in packages if p.startswith(wanted)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute (CI)")
    parser.add_argument("--only", nargs="*", choices=sorted(SUITES), help="run only these")
    parser.add_argument(
        "--out",
        type=Path,
        help="results file [default: results/latest.json, quick.json with --quick]",
    )
    args = parser.parse_args()
    args.out = args.out or RESULTS / ("quick.json" if args.quick else "latest.json")
    started = time.perf_counter()
    results: dict[str, Any] = {}
    if args.only and args.out.exists():  # a partial run updates its suites, keeps the others
        results = json.loads(args.out.read_text())
    results |= {"quick": args.quick, "machine": machine()}
    for name in args.only or SUITES:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results[name] = SUITES[name](args.quick)
    results["seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(report.render(results))
    print(f"\nwritten to {args.out} in {results['seconds']} s", file=sys.stderr)


if __name__ == "__main__":
    main()
