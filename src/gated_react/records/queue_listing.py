"""The workers' queue in a Postgres store, read from procrastinate's own tables.

One query lists the jobs of the task that advances threads: status, attempts, the worker that
holds a running job (procrastinate's worker id, the ``worker_id`` of the workers' log lines) and
its last heartbeat, when each job was queued, last started and how often it went back to the
queue. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from gated_react.records import RecordError

_FOUND = "SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS found"
_JOBS = """
SELECT j.id, j.args->>'thread_id' AS thread, j.status::text AS status, j.attempts,
       j.worker_id, w.last_heartbeat,
       (j.args ? 'goal') AS starts, (j.args ? 'answer') AS answers,
       (SELECT min(e.at) FROM procrastinate_events e
         WHERE e.job_id = j.id AND e.type = 'deferred') AS queued,
       (SELECT max(e.at) FROM procrastinate_events e
         WHERE e.job_id = j.id AND e.type = 'started') AS started,
       (SELECT max(e.at) FROM procrastinate_events e
         WHERE e.job_id = j.id AND e.type IN ('succeeded', 'failed', 'cancelled', 'aborted'))
         AS ended,
       (SELECT count(*) FROM procrastinate_events e
         WHERE e.job_id = j.id AND e.type IN ('deferred_for_retry', 'retried')) AS retries
  FROM procrastinate_jobs j LEFT JOIN procrastinate_workers w ON w.id = j.worker_id
 WHERE j.task_name = %(task)s
   AND (%(thread)s::text IS NULL OR j.args->>'thread_id' = %(thread)s)
   AND (%(all)s OR j.status <> 'succeeded' OR j.attempts > 1
        OR EXISTS (SELECT 1 FROM procrastinate_events e
                    WHERE e.job_id = j.id AND e.type IN ('deferred_for_retry', 'retried')))
 ORDER BY j.args->>'thread_id', j.id
 LIMIT %(limit)s
"""
_COUNTS = (
    "SELECT status::text AS status, count(*) AS n FROM procrastinate_jobs"
    " WHERE task_name = %(task)s GROUP BY status"
)
# Jobs queued and running, and when the oldest job still queued was first queued.
_BACKLOG = (
    "SELECT count(*) FILTER (WHERE j.status = 'todo') AS queued,"
    " count(*) FILTER (WHERE j.status = 'doing') AS running,"
    " (SELECT min(e.at) FROM procrastinate_events e JOIN procrastinate_jobs q ON q.id = e.job_id"
    "   WHERE q.task_name = %(task)s AND q.status = 'todo' AND e.type = 'deferred') AS oldest,"
    " now() AS now"
    " FROM procrastinate_jobs j WHERE j.task_name = %(task)s AND j.status IN ('todo', 'doing')"
)
_AMONG = (
    "SELECT DISTINCT args->>'thread_id' AS thread FROM procrastinate_jobs"
    " WHERE task_name = %(task)s AND args->>'thread_id' = ANY(%(threads)s)"
)
_OWNED = (
    "SELECT 1 FROM procrastinate_jobs"
    " WHERE task_name = %(task)s AND args->>'thread_id' = %(thread)s LIMIT 1"
)

STATES = {"todo": "queued", "doing": "running"}
"""procrastinate's job status -> the word ``gated-react queue`` shows (others as they are)."""


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job as ``gated-react queue`` lists it."""

    job: int
    thread: str
    kind: str
    status: str
    attempts: int
    retries: int
    worker_id: int | None
    heartbeat: str | None
    queued: str | None
    started: str | None
    ended: str | None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def queue_jobs(
    target: str, *, thread: str | None = None, everything: bool = False, limit: int = 200
) -> tuple[list[JobRow], dict[str, int]]:
    """The jobs to show (all with ``everything``; else every job not simply succeeded), by
    thread, and the count of jobs per state."""
    params = {"task": task_name(), "thread": thread, "all": everything, "limit": limit}
    with _connect(target) as conn:
        rows = conn.execute(_JOBS, params).fetchall()
        counts = conn.execute(_COUNTS, params).fetchall()
    jobs = [_row(row) for row in rows]
    return jobs, {STATES.get(r["status"], r["status"]): int(r["n"]) for r in counts}


def queue_backlog(target: str) -> tuple[dict[str, int], float]:
    """Jobs ``queued`` and ``running``, and the seconds since the oldest job still queued was
    queued (0 when none is); nothing when the store has no queue yet."""
    with _connect(target, missing_ok=True) as conn:
        row = None if conn is None else conn.execute(_BACKLOG, {"task": task_name()}).fetchone()
    if row is None:
        return {"queued": 0, "running": 0}, 0.0
    waited = 0.0 if row["oldest"] is None else (row["now"] - row["oldest"]).total_seconds()
    return {"queued": int(row["queued"]), "running": int(row["running"])}, max(waited, 0.0)


def fleet_threads(target: str, threads: list[str]) -> set[str]:
    """Those of ``threads`` that have a job in the queue: their runs belong to the workers."""
    with _connect(target, missing_ok=True) as conn:
        if conn is None or not threads:
            return set()
        rows = conn.execute(_AMONG, {"task": task_name(), "threads": threads}).fetchall()
    return {str(row["thread"]) for row in rows}


def owned_by_fleet(target: str, thread: str) -> bool:
    """The thread has a job in the queue: its run belongs to the workers."""
    with _connect(target, missing_ok=True) as conn:
        if conn is None:
            return False
        return conn.execute(_OWNED, {"task": task_name(), "thread": thread}).fetchone() is not None


@contextmanager
def _connect(target: str, *, missing_ok: bool = False) -> Iterator[Any]:
    """A short connection; a store without the queue's tables is one line (or None)."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(target, connect_timeout=10, autocommit=True, row_factory=dict_row) as conn:
        found = conn.execute(_FOUND).fetchone()
        if found is not None and found["found"]:
            yield conn
        elif missing_ok:
            yield None
        else:
            raise RecordError(
                "no queue in this store: no worker has run on it (python -m gated_react.workers)"
            )


def task_name() -> str:
    """The name workers register their one task under (from the workers extra)."""
    try:
        from gated_react.records.queue import TASK
    except ImportError as exc:
        raise RecordError(
            f"the queue needs the workers extra ({exc}): pip install 'gated-react[workers]'"
        ) from None
    return TASK


def _row(row: dict[str, Any]) -> JobRow:
    kind = "start" if row["starts"] else ("answer" if row["answers"] else "resume")
    return JobRow(
        job=int(row["id"]),
        thread=str(row["thread"]),
        kind=kind,
        status=STATES.get(row["status"], row["status"]),
        attempts=int(row["attempts"]),
        retries=int(row["retries"]),
        worker_id=None if row["worker_id"] is None else int(row["worker_id"]),
        heartbeat=_local(row["last_heartbeat"]),
        queued=_local(row["queued"]),
        started=_local(row["started"]),
        ended=_local(row["ended"]),
    )


def _local(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone().strftime("%Y-%m-%d %H:%M:%S")


_LIVE = (
    "SELECT id, status::text AS status FROM procrastinate_jobs WHERE task_name = %(task)s"
    " AND args->>'thread_id' = %(thread)s AND status IN ('todo', 'doing') ORDER BY id LIMIT 1"
)


def live_job(target: str, thread: str) -> tuple[int, str] | None:
    """The thread's job still ``queued`` or ``running`` (its worker perhaps dead: the fleet
    takes it over once its heartbeat is stale), if any: its id and that word."""
    with _connect(target) as conn:
        row = conn.execute(_LIVE, {"task": task_name(), "thread": thread}).fetchone()
    return None if row is None else (int(row["id"]), STATES[row["status"]])


_ANSWERED = (
    "SELECT id FROM procrastinate_jobs WHERE task_name = %(task)s"
    " AND args->>'thread_id' = %(thread)s AND args->>'question' = %(question)s"
    " AND status IN ('todo', 'doing') ORDER BY id LIMIT 1"
)


def queued_answer(target: str, thread: str, question: str) -> int | None:
    """The job that already carries an answer to this question and has not run yet, if any."""
    with _connect(target) as conn:
        params = {"task": task_name(), "thread": thread, "question": question}
        row = conn.execute(_ANSWERED, params).fetchone()
    return None if row is None else int(row["id"])
