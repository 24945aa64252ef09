"""A real trace backend for tests: Arize Phoenix (``phoenix serve``), offline, on free ports, in
its own process group, with a scratch working folder; reaped on every path.

Phoenix is heavy (about 850 MB with its dependencies), so it lives in its own virtualenv,
``make trace-backend`` (``.venv-phoenix/``), or wherever ``GATED_REACT_PHOENIX`` points (the
``phoenix`` executable). Without it the tests skip with the reason; with
``GATED_REACT_REQUIRE_PHOENIX=1`` (CI) they fail instead, as Postgres does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .studio_server import REPO, free_port

PHOENIX_VAR = "GATED_REACT_PHOENIX"
REQUIRE_VAR = "GATED_REACT_REQUIRE_PHOENIX"
HOW = "install it with `make trace-backend`, or point GATED_REACT_PHOENIX at a phoenix executable"
READY_SECONDS = 240.0  # 22-30 s here unloaded; a loaded 2-core machine takes several times that


def executable() -> Path | None:
    """The ``phoenix`` command to start, or None."""
    named = os.environ.get(PHOENIX_VAR, "").strip()
    found = Path(named) if named else REPO / ".venv-phoenix" / "bin" / "phoenix"
    return found if found.is_file() else None


def unavailable(why: str) -> None:
    """Skip, or fail when Phoenix is required."""
    if os.environ.get(REQUIRE_VAR, "").strip() not in ("", "0", "false", "no"):
        pytest.fail(f"{why}, but {REQUIRE_VAR}=1 requires Phoenix ({HOW})", pytrace=False)
    pytest.skip(f"{why}: {HOW}")


class Phoenix:
    """A running ``phoenix serve``: its OTLP endpoint and its REST API."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log
        self.url = f"http://127.0.0.1:{port}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as response:
            return json.load(response)

    def spans(self, project: str = "default") -> list[dict[str, Any]]:
        """Every span of a project, oldest first (Phoenix pages its answers)."""
        found: list[dict[str, Any]] = []
        cursor = ""
        while True:
            page = self.get(f"/v1/projects/{project}/spans?limit=1000{cursor}")
            found += page["data"]
            if not page.get("next_cursor"):
                return sorted(found, key=lambda span: span["start_time"])
            cursor = f"&cursor={page['next_cursor']}"

    def wait_for(self, count: int, trace_ids: set[str], seconds: float = 90.0) -> list[Any]:
        """The spans of these traces once ``count`` of them arrived (ingestion is async)."""
        deadline = time.monotonic() + seconds
        while True:
            spans = [s for s in self.spans() if s["context"]["trace_id"] in trace_ids]
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.5)

    def conversation(self, thread: str, count: int, seconds: float = 90.0) -> list[Any]:
        """The spans of every trace whose root names ``thread`` as its conversation, once
        ``count`` of them arrived (a process exports at exit, a server every few seconds)."""
        deadline = time.monotonic() + seconds
        while True:
            traces = {
                s["context"]["trace_id"]
                for s in self.spans()
                if s["parent_id"] is None
                and s["attributes"].get("gen_ai.conversation.id") == thread
            }
            spans = [s for s in self.spans() if s["context"]["trace_id"] in traces]
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.5)


def _ready(server: Phoenix) -> bool:
    try:
        with urllib.request.urlopen(server.url + "/healthz", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def phoenix_server(workdir: Path) -> Iterator[Phoenix]:
    """``phoenix serve`` on 127.0.0.1 (its gRPC receiver, which Phoenix binds on every
    interface, gets a free port too), killed with its process group on every path."""
    command = executable()
    if command is None:
        unavailable("Phoenix is not installed")
        raise AssertionError("unreachable")
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = workdir / "phoenix.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(command), "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Phoenix(proc, port, log)
    try:
        deadline = time.monotonic() + READY_SECONDS
        while not _ready(server):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                pytest.fail(f"phoenix serve did not come up on port {port}:\n{tail}")
            time.sleep(0.5)
        yield server
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
