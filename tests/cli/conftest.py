"""CLI fixtures: an isolated state folder (never the real XDG one) and a scripted model server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from gated_react.cli.app import app

from ..support.openai_server import FakeOpenAI, reply, tool_call
from ..support.reaping import PATIENCE, reap

CLI = str(Path(sys.executable).with_name("gated-react"))
REFUND = [
    tool_call("get_user_profile", user_id=42),
    tool_call("get_user_billing", user_id=42),
    tool_call("search_policy", query="refund pro monthly"),
    reply("Yes: the Pro monthly plan was paid 10 days ago, so USD 49.00 is refunded."),
]
_ENV = ("GATED_REACT_DB", "GATED_REACT_STORE", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL")


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's state folder under tmp; no model configured and no retries by default."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "0")
    monkeypatch.setenv("OPENAI_TIMEOUT_SECONDS", "10")
    return tmp_path / "xdg" / "gated-react"


@pytest.fixture
def server(state: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A chat-completions server the CLI finds through OPENAI_BASE_URL; push its script."""
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        yield fake


def invoke(*args: str) -> Result:
    """The CLI in this process (typer's runner), stdout and stderr kept apart."""
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def spawn(*args: str, **popen: object) -> subprocess.Popen[str]:
    """The installed console script as a real process in its own process group; it ends with
    the test whatever happens (``_reap_spawned``)."""
    proc: subprocess.Popen[str] = subprocess.Popen(  # type: ignore[call-overload]
        [CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        start_new_session=True,
        **popen,
    )
    _SPAWNED.append(proc)
    return proc


_SPAWNED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _reap_spawned() -> Iterator[None]:
    """Every CLI process a test started ends with the test, on every path: a failed wait must
    not leave one running, to be found (and warned about) in a later test."""
    yield
    while _SPAWNED:
        reap(_SPAWNED.pop())


def cli(*args: str, timeout: float = PATIENCE) -> subprocess.CompletedProcess[str]:
    """Run the console script to the end."""
    proc = spawn(*args)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        reap(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
