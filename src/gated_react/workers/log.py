"""What a worker tells its operator: one JSON object per line on stderr.

Each line is one ``write`` of one line, so the lines of concurrent jobs, and of the processes a
supervisor started on the same stderr, never interleave. Every line passes ``redact`` (no
password of a store URL, no API key) and ``printable_json`` (no raw control character reaches a
terminal or a log collector). The fixed keys come first: ``time``, ``event``, ``worker``.

Events: ``worker_started``, ``job_started``, ``job_ended``, ``connection_lost``,
``reconnected``, ``registered_again``, ``worker_stopped``, ``worker_exited`` (the supervisor's,
when a worker it started ended unasked), and ``log`` for the warnings of the libraries
underneath (psycopg's pools, procrastinate), so stderr stays one JSON object per line. The
reconnect code calls ``connection_lost`` when the store stops answering and ``reconnected`` once
it answers.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gated_react.errors import exception_line, one_line, printable_json
from gated_react.redact import redact

EVENTS = (
    "worker_started",
    "job_started",
    "job_ended",
    "connection_lost",
    "reconnected",
    "registered_again",
    "worker_stopped",
    "worker_exited",
    "log",
)
"""Every ``event`` a line may carry."""


def emit(event: str, worker: str, **fields: Any) -> None:
    """Write one line; a field that is None is left out."""
    if event not in EVENTS:
        raise ValueError(f"unknown worker event {event!r}")
    record: dict[str, Any] = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "event": event,
        "worker": worker,
        "pid": os.getpid(),
    }
    record.update((key, value) for key, value in fields.items() if value is not None)
    line = json.dumps(record, ensure_ascii=False, default=str, separators=(", ", ": "))
    text = printable_json(redact(line)) + "\n"
    try:
        os.write(sys.stderr.fileno(), text.encode())
    except (OSError, ValueError):  # no usable stderr (closed, or replaced by a test harness)
        sys.stderr.write(text)


@dataclass(frozen=True, slots=True)
class JobIds:
    """Which job a line is about."""

    worker: str
    worker_id: int | None
    """procrastinate's id of the worker (what ``gated-react queue`` shows)."""
    thread: str
    job: int
    attempt: int
    """1 for a job's first try."""

    def fields(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__ if name != "worker"}


def job_started(ids: JobIds) -> None:
    """A job was taken."""
    emit("job_started", ids.worker, **ids.fields())


def job_ended(
    ids: JobIds,
    *,
    outcome: str,
    seconds: float,
    stop_reason: str | None = None,
    tokens: int | None = None,
    error: str | None = None,
) -> None:
    """A job ended: ``outcome`` is ``ended`` (the run has a stop reason), ``waiting`` (it asks a
    human), ``refused`` (its answer was to a question no longer asked: ``error`` says why),
    ``busy`` (another try held its thread, a stalled worker's: the queue tries it again),
    ``taken_over`` (this try stalled and another worker has the job now) or ``failed`` (the
    job raised: ``error`` says what; the queue retries what the store failed)."""
    emit(
        "job_ended",
        ids.worker,
        **ids.fields(),
        outcome=outcome,
        stop_reason=stop_reason,
        seconds=round(seconds, 3),
        tokens=tokens,
        error=error,
    )


_LOST: dict[str, str] = {}  # what -> since when, while lost (the process's readiness)


def lost() -> dict[str, str]:
    """The connections lost and not back yet, with the time each was lost."""
    return dict(_LOST)


def is_lost(what: str = "store") -> bool:
    return what in _LOST


def connection_lost(
    worker: str,
    error: BaseException | str,
    *,
    what: str = "store",
    retry_in: float | None = None,
) -> None:
    """The worker lost its connection to ``what`` (the store, the queue); it tries again in
    ``retry_in`` seconds. Said again at each failed try, until ``reconnected``."""
    line = error if isinstance(error, str) else _error(error)
    _LOST.setdefault(what, datetime.now(UTC).isoformat(timespec="milliseconds"))
    emit("connection_lost", worker, what=what, error=line, retry_in=retry_in)


def reconnected(
    worker: str, *, what: str = "store", seconds: float | None = None, attempts: int | None = None
) -> None:
    """The connection to ``what`` works again, after ``seconds`` down and ``attempts`` tries."""
    _LOST.pop(what, None)
    emit(
        "reconnected",
        worker,
        what=what,
        seconds=None if seconds is None else round(seconds, 3),
        attempts=attempts,
    )


def registered_again(worker: str, was: int, worker_id: int, kept: int, lost: int) -> None:
    """Another worker had pruned this one as stalled (its heartbeat late): it registered again
    as ``worker_id``, taking back ``kept`` jobs at hand; ``lost`` of them had been requeued."""
    message = (
        f"{worker} was pruned as stalled (worker id {was}); registered again as {worker_id},"
        f" {kept} job(s) at hand kept, {lost} requeued meanwhile"
    )
    emit(
        "registered_again",
        worker,
        was=was,
        worker_id=worker_id,
        jobs_kept=kept,
        jobs_requeued=lost,
        message=message,
    )


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exception_line(exc, first_only=True)}"


class JsonLines(logging.Handler):
    """Python logging's records as ``log`` lines (installed by the worker for its lifetime)."""

    def __init__(self, worker: str) -> None:
        super().__init__(logging.WARNING)
        self.worker = worker

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = one_line(record.getMessage())
        except Exception:  # a record whose arguments do not format must not break the worker
            message = str(record.msg)
        emit("log", self.worker, logger=record.name, level=record.levelname, message=message)
