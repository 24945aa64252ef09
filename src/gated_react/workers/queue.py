"""The workers' side of the queue: the procrastinate app that runs the task, and its tables.

Its names and enqueueing are every host's (``gated_react.records.queue``); re-exported here
for ``gated_react.workers``."""

from __future__ import annotations

import procrastinate
from procrastinate.schema import SchemaManager

from gated_react.errors import exception_line
from gated_react.records.queue import (
    QUEUE,
    TASK,
    connector,
    enqueue_resume,
    enqueue_run,
    queue_store,
)
from gated_react.records.run_log import STORE_SCHEMA
from gated_react.store.checkpointer import StoreError
from gated_react.workers.job import FaultRetry, advance

__all__ = [
    "QUEUE",
    "TASK",
    "enqueue_resume",
    "enqueue_run",
    "install_queue",
    "make_app",
    "queue_store",
]


def make_app(url: str) -> procrastinate.App:
    """The queue on the Postgres database at ``url``, with the task the workers run."""
    app = procrastinate.App(connector=connector(url))
    app.task(name=TASK, queue=QUEUE, pass_context=True, retry=FaultRetry())(advance)
    return app


_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(1735549284, 2)"  # one installer at a time


def install_queue(url: str) -> None:
    """Create procrastinate's tables and functions unless the database has them, and the
    table workers write their runs' run logs to."""
    import psycopg

    store = queue_store(url)
    schema = SchemaManager.get_schema()
    try:
        with psycopg.connect(store.target, connect_timeout=10) as conn, conn.transaction():
            conn.execute(_SCHEMA_LOCK)
            found = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
            if found is None or found[0] is None:
                conn.execute(schema)  # procrastinate's own SQL, applied once
            conn.execute(STORE_SCHEMA)
    except psycopg.Error as exc:
        line = exception_line(exc, first_only=True)
        raise StoreError(f"store {store.shown}: {line}") from None
