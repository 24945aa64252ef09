"""The run log: one JSON object per line for every node event, safe to ``tail -f``.

Each line is written with a single ``write`` on a file opened for appending, so lines from
concurrent runs never interleave, and it is on disk before the next node starts; under a shared
``flock``, so that ``forget_lines`` (which takes it exclusively) never loses one. Every line
passes ``redact`` first: no API key, token or password reaches the file; and no control
character is written raw (JSON escapes them), so ``tail -f`` cannot drive the terminal.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import sys
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

from gated_react.errors import printable_json
from gated_react.records import RecordError
from gated_react.redact import redact

FIELDS = ("time", "thread", "step", "node", "action", "decision", "stop_reason", "tokens")
"""Keys every line has, in this order; lines may carry a few more (seconds, observation...)."""
FILE_NAME = "runs.log"
"""The run log's name in a folder (the XDG state folder, a worker's ``--run-log-dir``)."""


def log_line(event: dict[str, Any], secrets: tuple[str, ...] = ()) -> str:
    """One event as its line (without the newline): JSON, secrets masked, no raw C1 control
    character (for ``tail -f``). Files and the store's table hold the same lines."""
    line = json.dumps(event, ensure_ascii=False, default=str, separators=(", ", ": "))
    return printable_json(redact(line, *secrets))


class RunLog:
    """Appends events to one file; ``RunLog(None)`` writes nothing."""

    def __init__(self, path: Path | None, secrets: tuple[str, ...] = ()) -> None:
        self.path = path
        self._secrets = secrets
        self._fd: int | None = None
        if path is not None:
            self._fd = _open(path)

    def write(self, event: dict[str, Any]) -> None:
        if self._fd is None:
            return
        try:
            line = (log_line(event, self._secrets) + "\n").encode()
            fcntl.flock(self._fd, fcntl.LOCK_SH)  # many writers at once; none while forgetting
            try:
                os.write(self._fd, line)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        except OSError as exc:  # a full disk: the store holds the run; the log is its echo
            self.close()
            _warn(f"cannot write the run log {self.path} ({exc.strerror})")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open(path: Path) -> int | None:
    """The log's descriptor, or None (with a warning) for a path that is not a regular file: a
    FIFO would block the run until someone reads it (O_NONBLOCK: it fails at once instead), a
    device or a folder is no log. Any other failure to open it is an error."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno not in (errno.ENXIO, errno.EISDIR):  # FIFO without a reader, a folder
            raise RecordError(f"cannot open the run log {path}: {exc.strerror}") from None
        fd = None
    if fd is not None and stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    if fd is not None:
        os.close(fd)
    _warn(f"the run log {path} is not a regular file")
    return None


def _warn(problem: str) -> None:
    sys.stderr.write(f"gated-react: warning: {problem}; going on without it\n")


def read_events(path: Path | None, thread_id: str) -> list[dict[str, Any]]:
    """The logged events of one thread, oldest first; a missing log is an empty list."""
    if path is None or not path.is_file():
        return []
    needle = json.dumps(thread_id)
    return [event for event in _lines(path, needle) if event.get("thread") == thread_id]


def _lines(path: Path, needle: str) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        lines = (line for line in handle if needle in line)  # cheap: logs hold many threads
        yield from parse_lines(lines)


def forget_lines(path: Path | None, threads: Collection[str]) -> dict[str, int]:
    """Remove the lines of ``threads`` from the log at ``path`` (a missing log holds none); the
    lines removed per thread. The file is rewritten in place under an exclusive ``flock``: runs
    appending to it meanwhile wait, then append after what is kept."""
    removed: dict[str, int] = {}
    if path is None or not path.is_file() or not threads:
        return removed
    needles = [json.dumps(thread) for thread in threads]
    with path.open("r+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        kept: list[bytes] = []
        for line in handle.read().splitlines(keepends=True):
            thread = _of(line, needles, threads)
            if thread is None:
                kept.append(line)
            else:
                removed[thread] = removed.get(thread, 0) + 1
        if removed:
            handle.seek(0)
            handle.write(b"".join(kept))
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
    return removed


def _of(line: bytes, needles: list[str], threads: Collection[str]) -> str | None:
    """The thread of ``threads`` the line is of, if any."""
    text = line.decode("utf-8", "replace")
    if not any(needle in text for needle in needles):  # cheap: logs hold many threads
        return None
    for event in parse_lines([text]):
        if isinstance(thread := event.get("thread"), str) and thread in threads:
            return thread
    return None


def parse_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The events of logged lines; a line cut by a crash mid-write is skipped, not fatal."""
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


# The run log in a Postgres store: the same lines, one row each, for runs done by workers
# (they run on other machines than the operator's ``show``). ``id`` keeps their order.
STORE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS gated_react_run_log ("
    " id bigserial PRIMARY KEY, thread_id text NOT NULL, line text NOT NULL);"
    " CREATE INDEX IF NOT EXISTS gated_react_run_log_thread ON gated_react_run_log (thread_id, id)"
)
STORE_INSERT = (
    "INSERT INTO gated_react_run_log (thread_id, line) SELECT thread, line"
    " FROM unnest(%(threads)s::text[], %(lines)s::text[])"
    " WITH ORDINALITY AS logged(thread, line, n) ORDER BY n"
)
"""Lines of any threads, each ``threads[i]``'s ``lines[i]``, stored in the order given."""
_STORE_READ = "SELECT line FROM gated_react_run_log WHERE thread_id = %s ORDER BY id"
_STORE_FOUND = "SELECT to_regclass('gated_react_run_log') IS NOT NULL AS found"


def stored_events(saver: Any, thread_id: str) -> list[dict[str, Any]]:
    """The events workers logged into a Postgres store for one thread (none elsewhere)."""
    from gated_react.records.store import pg_connection

    conn = pg_connection(saver)
    if conn is None:
        return []
    with saver.lock, conn as pg, pg.cursor() as cur:
        cur.execute(_STORE_FOUND)
        if not cur.fetchone()["found"]:
            return []
        cur.execute(_STORE_READ, (thread_id,))
        lines = [row["line"] for row in cur.fetchall()]
    return [event for event in parse_lines(lines) if event.get("thread") == thread_id]


def merged(*logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events of one thread from several logs (the CLI's file, the store), oldest first."""
    return sorted((event for log in logs for event in log), key=lambda e: str(e.get("time", "")))
