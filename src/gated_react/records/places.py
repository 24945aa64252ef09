"""Every table this package writes a thread's rows to, in one list (``PLACES``), and a thread
removed from all of them at once (``forget``): ``gated-react delete`` and ``prune``.

A table that holds a thread's rows is one line of ``PLACES``; a store without that table (a
SQLite store has no queue, a store no worker ran on no run log table) skips it. A thread is held
with its thread lock while it goes, so no run advances it meanwhile, and it goes in one
transaction: every row, or none. A thread with a job the workers are running is left alone.
(The CLI's run log file is not a table: ``run_log.forget_lines`` removes its lines.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from gated_react.records import RecordError
from gated_react.records.store import pg_connection
from gated_react.store.rows import RECORDS, changed_outside, owned, parts_of

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
    subgraphs: bool = False
    """Rows of the graphs a thread ran as subgraphs are kept under ``<thread>|<namespace>``
    (the run records: ``store.rows.record_thread``)."""


PLACES: tuple[Place, ...] = (
    # the workers' queue: a job still queued would start the thread again (events go with it)
    Place("procrastinate_jobs", "queue jobs", "args->>'thread_id'", _PG, queue=True),
    Place("gated_react_run_log", "run log lines", stores=_PG),  # records.run_log's table
    Place(RECORDS, "call records", subgraphs=True),  # one row per call, where the store has it
    Place("checkpoint_writes", "pending writes", stores=_PG),
    Place("checkpoint_blobs", "channel values", stores=_PG),
    Place("writes", "pending writes", stores=frozenset({"sqlite"})),
    Place("checkpoints", "checkpoints"),
)
"""Where a thread is written, the rows that point at others first."""


BATCH = 100
"""Threads deleted in one transaction: a table without an index on the thread (the queue's
jobs) is scanned once per batch, not once per thread."""


@dataclass
class Forgotten:
    """What ``forget`` removed, thread by thread (rows per ``Place.what``), and what it left."""

    removed: dict[str, dict[str, int]] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    """Threads not deleted, and why: a run advances it, or a worker runs a job of it."""


def forget(saver: Any, threads: Sequence[str]) -> Forgotten:
    """Remove ``threads`` from every place of ``saver``'s store, each under its thread lock, a
    batch at a time in one transaction: every row of a thread, or none. A thread a run is
    advancing (``ThreadBusy``) or a worker's job is running is left, and said why; a thread
    not in the store is in neither ``removed`` nor ``left``."""
    done = Forgotten()
    for at in range(0, len(threads), BATCH):
        with ExitStack() as held:
            mine = [t for t in threads[at : at + BATCH] if _held(saver, t, held, done)]
            with _transaction(saver) as (kind, run):
                present = [p for p in PLACES if kind in p.stores and run(_exists(kind), p.table)]
                for place in present if mine else ():
                    if place.queue:
                        mine = _not_running(run, place, mine, done)
                for place in present if mine else ():
                    for thread, rows in _deleted(run, kind, place, mine).items():
                        done.removed.setdefault(thread, {})[place.what] = rows
    return done


def _held(saver: Any, thread: str, held: ExitStack, done: Forgotten) -> bool:
    from gated_react.store.locks import ThreadBusy, thread_lock

    try:
        held.enter_context(thread_lock(saver, thread))
    except ThreadBusy:
        done.left[thread] = "a run is advancing it"
        return False
    return True


def _exists(kind: Kind) -> str:
    if kind == "sqlite":
        return "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?"
    return "SELECT found FROM (SELECT to_regclass(%s)::text AS found) AS t WHERE found IS NOT NULL"


def _deleted(run: Any, kind: Kind, place: Place, threads: list[str]) -> dict[str, int]:
    """Delete the threads' rows of ``place``; how many each had."""
    owner = _parts(run, kind, place, threads) if place.subgraphs else {t: t for t in threads}
    if not owner:
        return {}
    mark = "?" if kind == "sqlite" else "%s"
    among = f"{place.thread} IN ({', '.join([mark] * len(owner))})"
    task = f" AND task_name = {mark}" if place.queue else ""
    params = (*owner, _task()) if place.queue else tuple(owner)
    counted = run(
        f"SELECT {place.thread} AS thread, count(*) AS n FROM {place.table}"
        f" WHERE {among}{task} GROUP BY {place.thread}",
        *params,
        every=True,
    )
    run(f"DELETE FROM {place.table} WHERE {among}{task}", *params)
    found: dict[str, int] = {}
    for thread, n in counted:
        found[owner[str(thread)]] = found.get(owner[str(thread)], 0) + int(n)
    return found


def _parts(run: Any, kind: Kind, place: Place, threads: list[str]) -> dict[str, str]:
    """The thread ids ``place`` keeps the threads' rows under, each with its thread: its own
    and its subgraphs' (``store.rows.record_thread``), never another thread's."""
    clause, params = parts_of(threads, "?" if kind == "sqlite" else "%s", place.thread)
    held = run(
        f"SELECT DISTINCT {place.thread} FROM {place.table} WHERE {clause}", *params, every=True
    )
    return owned((str(row[0]) for row in held), set(threads))


def _not_running(run: Any, place: Place, threads: list[str], done: Forgotten) -> list[str]:
    """Lock the threads' jobs (a worker's fetch skips a locked job); the threads none of whose
    jobs is running."""
    running = run(
        f"SELECT DISTINCT thread FROM (SELECT {place.thread} AS thread, status"
        f" FROM {place.table} WHERE {place.thread} = ANY(%s) AND task_name = %s FOR UPDATE)"
        " AS jobs WHERE status = 'doing'",
        threads,
        _task(),
        every=True,
    )
    busy = {str(row[0]) for row in running}
    for thread in threads:
        if thread in busy:
            done.left[thread] = "a worker is running it"
    return [thread for thread in threads if thread not in busy]


def _task() -> str:
    from gated_react.records.queue_listing import task_name

    return task_name()


@contextmanager
def _transaction(saver: Any) -> Iterator[tuple[Kind, Any]]:
    """``(kind, run)``, all in one transaction: ``run(sql, *params)`` gives a SELECT's first
    value (None for no row), or with ``every=True`` all its rows as tuples."""
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        with saver.lock:
            changed_outside()
            try:
                yield "sqlite", partial(_run, conn)
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
        return
    pg = pg_connection(saver)
    if pg is None:
        from gated_react.store.signed import unwrapped

        kind = type(unwrapped(saver)).__name__
        raise RecordError(f"threads are deleted from a SQLite or Postgres store, not a {kind}")
    with saver.lock, pg as conn, conn.transaction():
        yield "postgres", partial(_run, conn)


def _run(conn: Any, sql: str, *params: Any, every: bool = False) -> Any:
    cursor = conn.execute(sql, params)
    if cursor.description is None:  # a DELETE
        return None
    rows = [tuple(row.values()) if isinstance(row, dict) else tuple(row) for row in cursor]
    if every:
        return rows
    return rows[0][0] if rows else None
