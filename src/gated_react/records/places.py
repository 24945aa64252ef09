"""Every table this package writes a thread's rows to, in one list (``PLACES``), and a thread
removed from all of them at once (``forget``): ``gated-react delete`` and ``prune``.

A table that holds a thread's rows is one line of ``PLACES``; a store without that table (a
SQLite store has no queue, a store no worker ran on no run log table) skips it. The thread is
held with its thread lock while it goes, so no run advances it meanwhile, and it goes in one
transaction: every row, or none. A thread with a job the workers are running is left alone.
(The CLI's run log file is not a table: ``run_log.forget_lines`` removes its lines.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from gated_react.records import RecordError
from gated_react.records.store import pg_connection

Kind = Literal["sqlite", "postgres"]
_BOTH: frozenset[Kind] = frozenset({"sqlite", "postgres"})
_PG: frozenset[Kind] = frozenset({"postgres"})


@dataclass(frozen=True, slots=True)
class Place:
    """A table that holds rows of threads."""

    table: str
    what: str
    """What its rows are, as ``delete`` reports them."""
    thread: str = "thread_id"
    """The SQL expression of a row's thread id."""
    stores: frozenset[Kind] = _BOTH
    queue: bool = False
    """A table of the workers' queue: only the rows of gated-react's task."""


PLACES: tuple[Place, ...] = (
    # the workers' queue: a job still queued would start the thread again (events go with it)
    Place("procrastinate_jobs", "queue jobs", "args->>'thread_id'", _PG, queue=True),
    Place("gated_react_run_log", "run log lines", stores=_PG),  # records.run_log's table
    Place("gated_react_records", "call records"),  # one row per call, where the store has it
    Place("checkpoint_writes", "pending writes", stores=_PG),
    Place("checkpoint_blobs", "channel values", stores=_PG),
    Place("writes", "pending writes", stores=frozenset({"sqlite"})),
    Place("checkpoints", "checkpoints"),
)
"""Where a thread is written, the rows that point at others first."""


class ThreadRunning(RecordError):
    """A worker runs a job of the thread right now: it is not deleted."""


def forget(saver: Any, thread: str) -> dict[str, int]:
    """Remove ``thread`` from every place of ``saver``'s store, under its thread lock, in one
    transaction; the rows removed per place (``Place.what``), none for a thread not there.
    ``ThreadBusy`` if a run advances it, ``ThreadRunning`` if a worker's job runs it."""
    from gated_react.store.locks import thread_lock

    with thread_lock(saver, thread), _transaction(saver) as (kind, run):
        present = [p for p in PLACES if kind in p.stores and run(_exists(kind), (p.table,))]
        removed: dict[str, int] = {}
        for place in present:
            if place.queue:
                _refuse_running(run, place, thread)
            sql, params = _delete(kind, place, thread)
            count = run(sql, params)
            if count:
                removed[place.what] = removed.get(place.what, 0) + count
        return removed


def _exists(kind: Kind) -> str:
    if kind == "sqlite":
        return "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
    return "SELECT count(*) FROM (SELECT to_regclass(%s) AS found) AS t WHERE found IS NOT NULL"


def _delete(kind: Kind, place: Place, thread: str) -> tuple[str, tuple[Any, ...]]:
    mark = "?" if kind == "sqlite" else "%s"
    sql = f"DELETE FROM {place.table} WHERE {place.thread} = {mark}"
    if not place.queue:
        return sql, (thread,)
    return f"{sql} AND task_name = {mark}", (thread, _task())


def _refuse_running(run: Any, place: Place, thread: str) -> None:
    """Lock the thread's jobs (a worker's fetch skips a locked job) and refuse a running one."""
    running = run(
        "SELECT count(*) FILTER (WHERE status = 'doing') FROM (SELECT status"
        f" FROM {place.table} WHERE {place.thread} = %s AND task_name = %s FOR UPDATE) AS jobs",
        (thread, _task()),
    )
    if running:
        raise ThreadRunning(
            f"thread {thread!r} is running on a worker (gated-react queue --thread shows the "
            "job); nothing was deleted: delete it once the job has ended"
        )


def _task() -> str:
    from gated_react.records.queue_listing import task_name

    return task_name()


@contextmanager
def _transaction(saver: Any) -> Iterator[tuple[Kind, Any]]:
    """``(kind, run)``: ``run(sql, params)`` gives a count (a SELECT's first value, or the rows
    a DELETE removed), all in one transaction."""
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        with saver.lock:
            try:
                yield "sqlite", lambda sql, params: _counted(conn.execute(sql, params))
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
        return
    pg = pg_connection(saver)
    if pg is None:
        raise RecordError(f"a {type(saver).__name__} keeps no threads to delete")
    with saver.lock, pg as conn, conn.transaction():
        yield "postgres", lambda sql, params: _counted(conn.execute(sql, params))


def _counted(cursor: Any) -> int:
    if cursor.description is None:  # a DELETE
        return int(cursor.rowcount)
    row = cursor.fetchone()
    value = row[0] if not isinstance(row, dict) else next(iter(row.values()))
    return int(value)
