"""Real MCP servers for the tests, built with ``mcp.server.fastmcp.FastMCP``.

Run as a script: ``python mcp_servers.py stdio|http [--port P] [--pid-file F] [--broken|--mute]
[--name NAME]``. The ``notes`` server keeps notes in memory (so a test can tell one session
from a session per call) and has a tool for each way a server fails: an error, a hang
(``hang`` awaits, ``block`` holds the whole process), a crash and an oversized result; a
``transfer`` whose ledger shows what reached the server, and ``spawn``, a child process in the
server's process group. ``--broken`` exits before it serves, ``--mute`` never answers,
``--child F`` starts a child first and writes its pid to F. ``serve_http()`` runs one on
127.0.0.1 at a free port for a test and stops it after.

Only this file's ``__main__`` imports the MCP server library, so importing the helpers here
costs nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCRIPT = str(Path(__file__).resolve())


def stdio_config(*flags: str, name: str = "notes", env: dict[str, str] | None = None) -> dict:
    """The ``mcpServers`` entry of one stdio notes server started with ``flags``."""
    server: dict[str, Any] = {"command": sys.executable, "args": [SCRIPT, "stdio", *flags]}
    if env is not None:
        server["env"] = env
    return {"mcpServers": {name: server}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class HttpServer:
    """A notes server over streamable HTTP in a child process."""

    def __init__(self, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen(
            [sys.executable, SCRIPT, "http", "--port", str(self.port), *flags],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_ready(self, timeout: float | None = None) -> None:
        from .reaping import PATIENCE  # here: the file also runs as a script, on its own

        end = time.monotonic() + (PATIENCE if timeout is None else timeout)
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mcp test server exited with {self.proc.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port)):
                return
            time.sleep(0.05)
        raise RuntimeError("mcp test server did not listen in time")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def config(self, name: str = "web", **extra: Any) -> dict:
        return {"mcpServers": {name: {"url": self.url, **extra}}}


@contextlib.contextmanager
def serve_http(*flags: str) -> Iterator[HttpServer]:
    server = HttpServer(*flags)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def own_tools(transport: str) -> Iterator[Any]:
    """The tools of a notes server of their own, over ``transport`` (stdio or http): a test
    may end it or fill its ledger."""
    from gated_react.mcp import load_tools

    if transport == "stdio":
        with load_tools(stdio_config()) as tools:
            yield tools
    else:
        with serve_http() as server, load_tools(server.config()) as tools:
            yield tools


def alive(pid: int) -> bool:
    """Whether a process with this id still runs (a zombie counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def ends(pid: int, within: float | None = None) -> bool:
    """Whether the process ends within ``within`` seconds (a killed process takes a moment to
    be gone, longer on a loaded machine); one still running then is killed, so that a failed
    test leaves nothing behind."""
    from .reaping import PATIENCE

    end = time.monotonic() + (PATIENCE if within is None else within)
    while alive(pid):
        if time.monotonic() > end:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
            return False
        time.sleep(0.05)
    return True


NOTES: dict[str, str] = {}
"""The server's notes: one process, one session, one set."""


def read_note(title: str) -> str:
    """The text of one note."""
    if title not in NOTES:
        raise ValueError(f"no note named {title!r}")
    return NOTES[title]


def list_notes() -> dict[str, list[str]]:
    """The titles of all notes."""
    return {"titles": sorted(NOTES)}


def add_note(title: str, text: str) -> str:
    """Add a note (an existing one is kept)."""
    NOTES.setdefault(title, text)
    return f"saved {title}"


def delete_note(title: str) -> str:
    """Delete a note."""
    NOTES.pop(title, None)
    return f"deleted {title}"


def shout(text: str) -> str:
    """The text in capitals (no annotations)."""
    return text.upper()


def word_count(text: str) -> int:
    """How many words the text has."""
    return len(text.split())


async def hang(seconds: float = 3600, marker: str = "") -> str:
    """Answer after a long time (touching ``marker``, a file, first)."""
    import anyio

    if marker:
        Path(marker).touch()
    await anyio.sleep(seconds)
    return "late"


def block(seconds: float = 3600, marker: str = "") -> str:
    """Hold the whole server (a sync tool blocks its event loop): it reads nothing more, not
    even the end of its input, so only a signal stops it."""
    if marker:
        Path(marker).touch()
    time.sleep(seconds)
    return "late"


def crash() -> str:
    """End the server process at once."""
    os._exit(3)


def big(size: int) -> str:
    """A text of ``size`` characters."""
    return "x" * size


LEDGER: list[int] = []
"""The amounts ``transfer`` was called with."""
CHILDREN: list[subprocess.Popen[bytes]] = []


def transfer(amount: int) -> str:
    """Send ``amount`` (a call with consequences: what arrives is in the ledger)."""
    LEDGER.append(amount)
    return f"sent {amount}"


def ledger() -> dict[str, list[int]]:
    """Every amount sent so far."""
    return {"sent": list(LEDGER)}


def spawn() -> int:
    """Start a child that sleeps, in the server's process group (no setsid); its pid."""
    return _child()


def _child() -> int:
    sleeper = [sys.executable, "-c", "import time; time.sleep(3600)"]
    child = subprocess.Popen(
        sleeper, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    CHILDREN.append(child)
    return child.pid


def whoami() -> dict[str, Any]:
    """The server's process id and environment names."""
    return {"pid": os.getpid(), "env": sorted(os.environ)}


def _server(name: str) -> Any:
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    read_only = ToolAnnotations(readOnlyHint=True)
    app = FastMCP(name, log_level="ERROR")
    for tool in (read_note, list_notes, hang, block, crash, big, whoami, ledger, spawn):
        app.add_tool(tool, annotations=read_only)
    app.add_tool(add_note, annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
    app.add_tool(
        delete_note, annotations=ToolAnnotations(destructiveHint=True, idempotentHint=True)
    )
    app.add_tool(transfer, annotations=ToolAnnotations(destructiveHint=False))
    app.add_tool(shout)
    app.add_tool(word_count, name="word.count", annotations=ToolAnnotations(idempotentHint=True))
    return app


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--pid-file")
    parser.add_argument("--name", default="notes")
    parser.add_argument("--broken", action="store_true")
    parser.add_argument("--mute", action="store_true")
    parser.add_argument("--child")
    args = parser.parse_args(argv)
    if args.pid_file:
        with open(args.pid_file, "a") as out:
            out.write(json.dumps(os.getpid()) + "\n")
    if args.child:
        Path(args.child).write_text(str(_child()))
    if args.broken:
        token = os.environ.get("NOTES_TOKEN", "none")
        sys.exit(f"RuntimeError: the notes database is locked (token {token})")
    if args.mute:
        time.sleep(3600)
    app = _server(args.name)
    if args.transport == "stdio":
        app.run("stdio")
    else:
        app.settings.port = args.port
        app.run("streamable-http")


if __name__ == "__main__":
    main(sys.argv[1:])
