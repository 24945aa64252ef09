"""A worker's heartbeat, and its way back when the fleet took it for dead.

procrastinate deletes the row of any worker whose heartbeat is ``--stalled-after`` seconds old
(every worker does so as it starts), and a heartbeat only updates that row. A live worker whose
heartbeats ran late (the store down longer than that, a machine too loaded to beat in time) and
that another worker pruned meanwhile went on beating a row that no longer existed: invisible to
the fleet and to ``gated-react queue``, its jobs at hand free for any worker to take over as
stalled, its next fetch refused by the jobs' foreign key. Here a beat that finds no row registers
the worker again and takes back the jobs at hand that no other worker has taken over yet; so
does a fetch that the foreign key refuses, when the worker was pruned since its last beat.

A job another worker did take over (``taken_over``) is that worker's from then on: the try
that stalled, stopped or frozen, gives it up when it fails, and records nothing of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import procrastinate
import psycopg

from gated_react.errors import causes
from gated_react.store.locks import ThreadBusy

_BEAT = (
    "UPDATE procrastinate_workers SET last_heartbeat = now() WHERE id = %(worker_id)s RETURNING id"
)
_TAKE_BACK = (
    "UPDATE procrastinate_jobs SET worker_id = %(worker_id)s"
    " WHERE id = ANY(%(jobs)s) AND status = 'doing' AND worker_id IS NULL RETURNING id"
)


_FETCHED_BY = "procrastinate_jobs_worker_id_fkey"
_ATTEMPTS = "SELECT attempts FROM procrastinate_jobs WHERE id = %(job)s"


def pruned(exc: BaseException) -> bool:
    """The store refused a job to a worker id it no longer has (a fetch after a prune)."""
    return any(
        isinstance(seen, psycopg.errors.ForeignKeyViolation)
        and seen.diag.constraint_name == _FETCHED_BY
        for seen in causes(exc)
    )


async def beat(app: procrastinate.App, worker_id: int) -> bool:
    """Update the worker's heartbeat; False if its row is gone (another worker pruned it)."""
    rows = await app.connector.execute_query_all_async(query=_BEAT, worker_id=worker_id)
    return bool(rows)


async def register_again(app: procrastinate.App, jobs: Iterable[int]) -> tuple[int, list[int]]:
    """A new row for a pruned worker, and the jobs at hand it took back (the others were
    requeued as stalled before it came back)."""
    worker_id = await app.job_manager.register_worker()
    rows: list[dict[str, Any]] = await app.connector.execute_query_all_async(
        query=_TAKE_BACK, worker_id=worker_id, jobs=list(jobs)
    )
    return worker_id, [int(row["id"]) for row in rows]


async def taken_over(app: procrastinate.App, job: procrastinate.jobs.Job) -> bool:
    """Another worker took this try's job over: the stalled-job sweep requeued it while this
    worker's heartbeat was late (stopped, frozen), so its attempts went up since this try
    began. False when the store cannot tell (lost): the try's failure is then its own."""
    try:
        row = await app.connector.execute_query_one_async(query=_ATTEMPTS, job=job.id)
    except Exception:
        return False
    return row is not None and int(row["attempts"]) > job.attempts


async def failed_as(app: procrastinate.App, job: procrastinate.jobs.Job, exc: BaseException) -> str:
    """How a job that raised ended. Not every raise is a failure: ``busy``, its thread was
    held by another try (one whose worker stalled, its job taken over but its lock still held),
    and the queue tries it again; ``taken_over``, this try stalled and another worker has the
    job now (its connection dropped meanwhile: no store was lost). Else ``failed``."""
    if isinstance(exc, ThreadBusy):
        return "busy"
    if isinstance(exc, Exception) and await taken_over(app, job):
        return "taken_over"
    return "failed"
