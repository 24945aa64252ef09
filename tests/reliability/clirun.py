"""The ``gated-react`` console script as a real process, for the reliability tests: an isolated
state folder, a scripted model server, and an optional prefix (e.g. one that drops root's right
to ignore file permissions)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..support.cli import CLI, invoke
from ..support.reaping import PATIENCE, reap
from ..support.scenarios import without_ids

TIMEOUT = PATIENCE


@dataclass(frozen=True)
class Done:
    """A finished CLI process."""

    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.out)
        return value

    def one_error_line(self) -> str:
        """The single ``gated-react: error:`` line on stderr; fails on a traceback or more."""
        lines = self.err.strip().splitlines()
        assert "Traceback" not in self.err, self.err
        assert len(lines) == 1, self.err
        assert lines[0].startswith("gated-react: error: "), self.err
        return lines[0]


def environment(
    monkeypatch: pytest.MonkeyPatch, state: Path, base_url: str, **extra: str
) -> dict[str, str]:
    """The CLI's environment, set in this process (for ``here``) and returned (for
    ``gated_react``): its own XDG state folder, the model server, no retries."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "GATED_REACT_DB", "GATED_REACT_STORE")):
            monkeypatch.delenv(name)
    settings = {
        "XDG_STATE_HOME": str(state),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_MAX_RETRIES": "0",
        "OPENAI_TIMEOUT_SECONDS": "10",
        **extra,
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    return dict(os.environ)


def here(*args: str) -> Done:
    """The CLI in this process (typer's runner, ``os.environ`` as it is): no start-up cost."""
    result = invoke(*args)
    return Done(result.exit_code, result.stdout, result.stderr)


def gated_react(env: dict[str, str], *args: str, prefix: Sequence[str] = ()) -> Done:
    """Run the console script to its end in its own process group (killed on a timeout)."""
    return together(env, [args], prefix=prefix)[0]


def together(
    env: dict[str, str], commands: Sequence[Sequence[str]], prefix: Sequence[str] = ()
) -> list[Done]:
    """Several independent commands at once (each pays the start-up cost; the cores share it)."""
    procs = [
        subprocess.Popen(
            [*prefix, CLI, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        for args in commands
    ]
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=TIMEOUT)
            done.append(Done(proc.returncode, out, err))
    finally:
        for proc in procs:
            reap(proc)
    return done


def same_run(result: dict[str, Any]) -> dict[str, Any]:
    """A CLI result without what differs between two equal runs (seconds, thread) or what only
    `show` adds (its goal, log events, the run context); call ids differ between runs, so
    messages compare by type and text."""
    usage = {k: v for k, v in result["usage"].items() if k != "seconds"}
    skip = ("usage", "thread_id", "goal", "events", "run_context", "history", "messages")
    said = [(m.get("type"), m.get("content")) for m in result.get("messages", [])]
    history = without_ids(result.get("history", []))
    kept = {k: v for k, v in result.items() if k not in skip}
    return {**kept, "usage": usage, "history": history, "messages": said}


def as_run_after_a_fault(result: dict[str, Any]) -> dict[str, Any]:
    """``same_run`` without what a fault may add to a run: the model calls it cost (a reply
    lost with a failed write is asked for again, and the record counts both), in ``usage``,
    the trace's step numbers and the closing ``message`` ("final answer after N steps")."""
    seen = same_run(result)
    usage = {k: v for k, v in seen["usage"].items() if k in ("tool_calls", "per_tool")}
    trace = [{k: v for k, v in entry.items() if k != "step"} for entry in seen["trace"]]
    return {**seen, "usage": usage, "trace": trace, "message": None}
