"""Run a program of ``programs/`` on one constructor and keep what its user could see.

Each run is a fresh Python process (the program as a script, in its own working directory)
talking to a local chat-completions server that plays the model (``models.py``). What is kept
of it: the exit code, stdout and stderr, what each ``invoke`` / ``stream`` gave the program and
the thread's stored state after it (``constructor.Recorded``), and every request the model got.
``compare.differences`` says how two runs differ for their user.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..support.openai_server import FakeOpenAI
from ..support.reaping import PATIENCE
from .data import make_chinook
from .models import RESPONDERS

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "programs"
PREPARE = {"sql_agent": make_chinook, "sql_agent_review": make_chinook}
"""What a program finds in its working directory before it starts (the SQLite file its
tutorial downloads: the download is skipped when the file is there, as the program says)."""

PROMPT_EXTRA_CHARS_ALLOWED = 0
"""Characters a gated graph may add to the app's system prompt on native tool calling; the
issue asks for the gate's rules cut to what the protocol needs (create_agent adds none)."""


@dataclass
class Run:
    """One program's run on one constructor, its ids renumbered (``call#1``, ``id#1``)."""

    constructor: str
    code: int
    stdout: str
    stderr: str
    records: list[dict[str, Any]]
    requests: list[dict[str, Any]]

    @property
    def error(self) -> str:
        """The last line of stderr: the exception that ended the program, if one did."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else ""


def _env(constructor: str, record: Path, base_url: str) -> dict[str, str]:
    keep = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENAI_", "GATED_REACT_", "LANGSMITH_", "LANGCHAIN_", "OTEL_"))
    }
    return keep | {
        "APPS_CONSTRUCTOR": constructor,
        "APPS_RECORD": str(record),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "sk-apps-suite-local",
        "LANGSMITH_TRACING": "false",
        "PYTHONPATH": str(ROOT),
    }


def run(name: str, constructor: str, workdir: Path, program: Path | None = None) -> Run:
    """``programs/<name>.py`` (or ``program``, a changed copy of it, with its model) run on
    ``constructor`` in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    if name in PREPARE:
        PREPARE[name](workdir)
    record = workdir / "record.jsonl"
    with FakeOpenAI(default=RESPONDERS[name]) as server:
        done = subprocess.run(
            [sys.executable, str(program or PROGRAMS / f"{name}.py")],
            cwd=workdir,
            env=_env(constructor, record, server.base_url),
            capture_output=True,
            text=True,
            timeout=PATIENCE,
            check=False,
        )
        requests = list(server.requests)
    lines = record.read_text().splitlines() if record.exists() else []
    raw = Run(constructor, done.returncode, done.stdout, done.stderr, [], requests)
    raw.records = [json.loads(line) for line in lines]
    return renumbered(raw)


ID_PATTERNS = (
    (re.compile(r"call_[0-9a-f]{12}"), "call"),
    (
        re.compile(
            r"(?:lc_run--|run-)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        ),
        "id",
    ),
    (re.compile(r"chatcmpl-[0-9a-f]{12}"), "completion"),
    (re.compile(r"0x[0-9a-f]{6,}"), "address"),
)


def renumbered(run_: Run) -> Run:
    """Random ids as their order of first appearance (stdout first, then the records and the
    requests), so two runs that behave alike read alike."""
    text = json.dumps([run_.stdout, run_.stderr, run_.records, run_.requests])
    for pattern, kind in ID_PATTERNS:
        numbers: dict[str, str] = {}
        for found in pattern.findall(text):
            numbers.setdefault(found, f"{kind}#{len(numbers) + 1}")
        text = pattern.sub(lambda match, n=numbers: n[match.group(0)], text)
    stdout, stderr, records, requests = json.loads(text)
    return Run(run_.constructor, run_.code, stdout, stderr, records, requests)
