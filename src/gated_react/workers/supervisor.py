"""The supervisor: ``-n`` worker processes, stopped gracefully on SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys


def start_workers(
    url: str, factory: str, processes: int, *, burst: bool = False, stalled_after: float = 30.0
) -> list[subprocess.Popen[bytes]]:
    """Start ``processes`` worker processes; stop them with ``terminate()`` (they finish the
    job at hand) and ``wait()``."""
    command = [sys.executable, "-m", "gated_react.workers", "--store", url, "--graph", factory]
    command += ["--stalled-after", str(stalled_after)] + (["--burst"] if burst else [])
    return [  # own sessions: a terminal's Ctrl-C reaches the supervisor, which stops each once
        subprocess.Popen([*command, "--name", f"worker-{index}"], start_new_session=True)
        for index in range(processes)
    ]


def supervise(args: argparse.Namespace) -> int:
    """Run ``args.processes`` workers until they end; SIGTERM/SIGINT stop each once."""
    procs = start_workers(
        args.store, args.graph, args.processes, burst=args.burst, stalled_after=args.stalled_after
    )

    def stop(*_: object) -> None:  # one graceful stop each: workers finish the job at hand
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return max(proc.wait() for proc in procs)
