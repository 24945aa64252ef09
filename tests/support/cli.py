"""The CLI as tests drive it: in this process (typer's runner) or as the installed console
script in its own process group, reaped with the test (``tests/cli/conftest.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import Result
from typer.testing import CliRunner

from gated_react.cli.app import app

from .openai_server import reply, tool_call
from .reaping import PATIENCE, reap

CLI = str(Path(sys.executable).with_name("gated-react"))
REFUND = [
    tool_call("get_user_profile", user_id=42),
    tool_call("get_user_billing", user_id=42),
    tool_call("search_policy", query="refund pro monthly"),
    reply("Yes: the Pro monthly plan was paid 10 days ago, so USD 49.00 is refunded."),
]
"""The refund scenario's model replies, for a scripted server."""


def invoke(*args: str) -> Result:
    """The CLI in this process (typer's runner), stdout and stderr kept apart."""
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


SPAWNED: list[subprocess.Popen[str]] = []
"""The CLI processes started by the running test; its fixture reaps them (``reap_spawned``)."""


def spawn(*args: str, **popen: object) -> subprocess.Popen[str]:
    """The installed console script as a real process in its own process group; it ends with
    the test whatever happens (``reap_spawned``)."""
    proc: subprocess.Popen[str] = subprocess.Popen(  # type: ignore[call-overload]
        [CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        start_new_session=True,
        **popen,
    )
    SPAWNED.append(proc)
    return proc


def reap_spawned() -> None:
    """End every CLI process a test started, on every path: a failed wait must not leave one
    running, to be found (and warned about) in a later test."""
    while SPAWNED:
        reap(SPAWNED.pop())


def cli(*args: str, timeout: float = PATIENCE) -> subprocess.CompletedProcess[str]:
    """Run the console script to the end."""
    proc = spawn(*args)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        reap(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
