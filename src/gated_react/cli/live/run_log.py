"""The run log: one JSON object per line for every node event, safe to ``tail -f``.

Each line is written with a single ``write`` on a file opened for appending, so lines from
concurrent runs never interleave, and it is on disk before the next node starts. Every line
passes ``redact`` first: no API key, token or password reaches the file; and no control
character is written raw (JSON escapes them), so ``tail -f`` cannot drive the terminal.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gated_react.cli.exits import CliError
from gated_react.errors import printable_json
from gated_react.redact import redact

FIELDS = ("time", "thread", "step", "node", "action", "decision", "stop_reason", "tokens")
"""Keys every line has, in this order; lines may carry a few more (seconds, observation...)."""


class RunLog:
    """Appends events to one file; ``RunLog(None)`` writes nothing."""

    def __init__(self, path: Path | None, secrets: tuple[str, ...] = ()) -> None:
        self.path = path
        self._secrets = secrets
        self._fd: int | None = None
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise CliError(f"cannot open the run log {path}: {exc.strerror}") from None

    def write(self, event: dict[str, Any]) -> None:
        if self._fd is None:
            return
        line = json.dumps(event, ensure_ascii=False, default=str, separators=(", ", ": "))
        try:
            text = printable_json(redact(line, *self._secrets))  # no raw C1 for `tail -f`
            os.write(self._fd, (text + "\n").encode())
        except OSError as exc:  # a full disk: the store holds the run; the log is its echo
            self.close()
            sys.stderr.write(
                f"gated-react: warning: cannot write the run log {self.path} ({exc.strerror}); "
                "going on without it\n"
            )

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_events(path: Path | None, thread_id: str) -> list[dict[str, Any]]:
    """The logged events of one thread, oldest first; a missing log is an empty list."""
    if path is None or not path.is_file():
        return []
    needle = json.dumps(thread_id)
    return [event for event in _lines(path, needle) if event.get("thread") == thread_id]


def _lines(path: Path, needle: str) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if needle not in line:  # cheap filter before parsing: logs hold many threads
                continue
            try:
                event = json.loads(line)
            except ValueError:  # a line cut by a crash mid-write is skipped, not fatal
                continue
            if isinstance(event, dict):
                yield event
