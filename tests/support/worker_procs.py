"""Real worker processes whose stderr (their JSON log lines) a test reads, each answering health
probes on a port of its own (``--health-port 0``: the port is read from its first line).

Every process is killed and reaped when the ``fleet`` block exits, on every path.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .procs import WAIT


def until(condition: Callable[[], bool], what: str = "condition") -> None:
    """Poll ``condition`` (a query, a scrape) every 0.2 s for at most ``WAIT`` seconds."""
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still not true after {WAIT:g} s")
        time.sleep(0.2)


@dataclass
class Worker:
    """One worker process and the file its stderr goes to."""

    proc: subprocess.Popen[bytes]
    stderr: Path

    def lines(self) -> list[dict[str, Any]]:
        """Its log lines so far (a line still being written is left out)."""
        text = self.stderr.read_text(encoding="utf-8", errors="replace")
        out = []
        for line in text.splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line.get("event") == name]

    @property
    def health(self) -> str:
        """The base URL it answers probes on."""
        until(lambda: bool(self.events("worker_started")), "worker started")
        return str(self.events("worker_started")[0]["health"])

    def get(self, path: str) -> tuple[int, str]:
        """An HTTP GET of ``path`` on its health server: status and body."""
        try:
            with urllib.request.urlopen(self.health + path, timeout=WAIT) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as exc:
            with exc:
                return int(exc.code), exc.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """One sample of its ``/metrics`` (0 when absent)."""
        from prometheus_client.parser import text_string_to_metric_families

        _, body = self.get("/metrics")
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return 0.0


@contextmanager
def fleet(url: str, factory: str, count: int, folder: Path, *extra: str) -> Iterator[list[Worker]]:
    """``count`` workers on the store at ``url``, each with a health server on a free port."""
    with ExitStack() as stack:
        workers = []
        for index in range(count):
            err = folder / f"worker-{index}.err"
            handle = stack.enter_context(err.open("wb"))
            command = [sys.executable, "-m", "gated_react.workers", "--store", url]
            command += ["--graph", factory, "--name", f"worker-{index}", "--health-port", "0"]
            proc = subprocess.Popen([*command, *extra], stderr=handle, start_new_session=True)
            stack.callback(_reap, proc)
            workers.append(Worker(proc, err))
        yield workers


def _reap(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(WAIT)
