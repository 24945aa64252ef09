"""The workers' queue as every host sees it: its names, the store it lives in, and enqueueing.

A job is deferred by the task's name, so a client (the CLI answering a question, an
application starting runs) needs neither the workers' code nor their graph: the workers
register the task under ``TASK`` (``gated_react.workers.make_app``) and take the jobs.
"""

from __future__ import annotations

import uuid
from typing import Any

import procrastinate

from gated_react.errors import exception_line
from gated_react.records.run_log import STORE_SCHEMA
from gated_react.runs import NO_ANSWER
from gated_react.store.checkpointer import StoreError, StoreURL

QUEUE = "gated-react"
"""The procrastinate queue the jobs go to."""
TASK = "gated_react.advance"
"""The name of the one task: advance a thread (start it, or resume it)."""


def queue_store(url: str) -> StoreURL:
    """The parsed store URL; the queue needs Postgres."""
    store = StoreURL.parse(url)
    if store.kind != "postgres":
        raise StoreError(f"store {store.shown}: workers need a postgresql:// store")
    return store


def connector(url: str) -> procrastinate.PsycopgConnector:
    """A connector to the queue at ``url`` (small pools: many workers share the database).
    procrastinate's pool checks each connection before use (``check_connection``), so a
    restarted server costs a reconnect."""
    return procrastinate.PsycopgConnector(conninfo=queue_store(url).target, min_size=1, max_size=4)


def client_app(url: str) -> procrastinate.App:
    """The queue at ``url`` for enqueueing only (no task: the workers run them)."""
    return procrastinate.App(connector=connector(url))


_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(1735549284, 2)"  # one installer at a time


def install_queue(url: str) -> None:
    """Create procrastinate's tables and functions unless the database has them, and the
    table workers write their runs' run logs to."""
    import psycopg
    from procrastinate.schema import SchemaManager

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


def _deferrer(app: procrastinate.App, thread_id: str, queueing_lock: str | None = None) -> Any:
    """Jobs of one thread never run at once: procrastinate's job lock is the thread id."""
    return app.configure_task(TASK, queue=QUEUE, lock=thread_id, queueing_lock=queueing_lock)


def _answer_lock(thread_id: str, question: str) -> str:
    """The queueing lock of an answer: procrastinate queues one job per lock while it waits
    (``AlreadyEnqueued`` for a second), so checking and queueing are one step in the database."""
    return f"{TASK} answer {question} of {thread_id}"


def enqueue_run(
    app: procrastinate.App,
    goal: str,
    *,
    thread_id: str | None = None,
    context: dict[str, Any] | None = None,
) -> str:
    """Queue a new run (the app must be open); returns its thread id. ``context`` (JSON) is the
    run's LangGraph context, what its tools read as ``ToolRuntime.context``."""
    thread_id = thread_id or uuid.uuid4().hex
    extra = {} if context is None else {"context": context}
    _deferrer(app, thread_id).defer(thread_id=thread_id, goal=goal, **extra)
    return thread_id


def enqueue_resume(
    app: procrastinate.App,
    thread_id: str,
    answer: Any = NO_ANSWER,
    *,
    question: str | None = None,
    once: bool = False,
    context: dict[str, Any] | None = None,
) -> int:
    """Queue a resume; returns its job id. ``answer`` replies to the question the paused run
    waits on (only to the one whose ``id`` is ``question``, if given: a repeated answer then
    never answers another; its job ends ``refused``). With ``once`` and a ``question``, a
    second answer to it while the first waits in the queue is not queued: procrastinate's
    ``AlreadyEnqueued`` (the database decides, so two callers at once queue one).
    ``context`` as for ``enqueue_run``: a resume needs it again."""
    kwargs: dict[str, Any] = {"thread_id": thread_id}
    if context is not None:
        kwargs["context"] = context
    if answer is not NO_ANSWER:
        kwargs["answer"] = answer
    lock = None
    if question is not None:
        kwargs["question"] = question
        lock = _answer_lock(thread_id, question) if once else None
    return int(_deferrer(app, thread_id, lock).defer(**kwargs))
