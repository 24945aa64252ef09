"""A real ``langgraph dev`` for tests: offline, on a free port, in its own process group.

The server runs in a scratch folder (its ``.langgraph_api/`` lands there) with the repository's
``langgraph.json``; stop() and kill() act on the process group by id, and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from .openai_server import FakeOpenAI
from .reaping import PATIENCE

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "langgraph.json"
LANGGRAPH = Path(sys.executable).parent / "langgraph"
OFFLINE = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
}


def free_port() -> int:
    """A port nothing listens on now (the server moves silently if its port is taken)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DevServer:
    """``langgraph dev --no-browser --no-reload`` on 127.0.0.1, restartable on the same port."""

    def __init__(self, workdir: Path, env: dict[str, str], config: Path | None = None) -> None:
        self.workdir = workdir
        self.config = config or CONFIG
        self.port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        self.env.update(OFFLINE, **env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "server.log"
        self.startup_seconds: list[float] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = PATIENCE) -> None:
        command = [
            str(LANGGRAPH),
            "dev",
            "--config",
            str(self.config),
            "--no-browser",
            "--no-reload",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        started = time.monotonic()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                command,
                cwd=self.workdir,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"langgraph dev exited ({self.proc.returncode}):\n{self.tail()}")
            if self._ok():
                self.startup_seconds.append(time.monotonic() - started)
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"langgraph dev not ready within {timeout:g} s:\n{self.tail()}")

    def _ok(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/ok", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown hook runs, nothing is flushed."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it if it lingers."""
        self._signal(signal.SIGTERM, grace=15.0)

    def _signal(self, sig: signal.Signals, grace: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # children left in the group
            os.killpg(proc.pid, signal.SIGKILL)

    def cleanup(self) -> None:
        """Stop the server and remove its ``.langgraph_api/`` folder."""
        self.stop()
        shutil.rmtree(self.workdir / ".langgraph_api", ignore_errors=True)

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def dev_server(workdir: Path, model: FakeOpenAI, config: Path = CONFIG) -> DevServer:
    """A dev server whose model is ``model`` and whose store is a SQLite file in ``workdir``,
    serving the graphs of ``config`` (the repository's ``langgraph.json`` unless told)."""
    env = {
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_MAX_RETRIES": "0",
        "GATED_REACT_DB": str(workdir / "runs.sqlite"),
        "GATED_REACT_STUDIO_WORKSPACES": str(workdir / "workspaces"),
    }
    return DevServer(workdir, env, config)


@contextlib.contextmanager
def serving(workdir: Path, model: FakeOpenAI, config: Path = CONFIG) -> Iterator[DevServer]:
    """A started dev server (``dev_server``), stopped and cleaned up afterwards."""
    server = dev_server(workdir, model, config)
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


def drive(server: DevServer, scenario: Callable[[LangGraphClient], Awaitable[Any]]) -> Any:
    """Run an async SDK scenario against the server (a fresh client, closed after)."""

    async def main() -> Any:
        client = get_client(url=server.url)
        try:
            return await scenario(client)
        finally:
            await client.aclose()

    return asyncio.run(main())
