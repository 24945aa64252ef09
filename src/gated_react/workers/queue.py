"""The queue: the procrastinate app on the store's database, its tables, and enqueueing."""

from __future__ import annotations

import uuid
from typing import Any

import procrastinate
from procrastinate.schema import SchemaManager

from gated_react.checkpoint import StoreError, StoreURL
from gated_react.errors import exception_line
from gated_react.runs import NO_ANSWER
from gated_react.workers.job import FaultRetry, advance

QUEUE = "gated-react"
TASK = "gated_react.advance"


def queue_store(url: str) -> StoreURL:
    """The parsed store URL; the queue needs Postgres."""
    store = StoreURL.parse(url)
    if store.kind != "postgres":
        raise StoreError(f"store {store.shown}: workers need a postgresql:// store")
    return store


def make_app(url: str) -> procrastinate.App:
    """The queue on the Postgres database at ``url`` (small pools: many workers share it).
    procrastinate's pool checks each connection before use (``check_connection``), so a
    restarted server costs a reconnect."""
    store = queue_store(url)
    connector = procrastinate.PsycopgConnector(conninfo=store.target, min_size=1, max_size=4)
    app = procrastinate.App(connector=connector)
    app.task(name=TASK, queue=QUEUE, pass_context=True, retry=FaultRetry())(advance)
    return app


_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(1735549284, 2)"  # one installer at a time


def install_queue(url: str) -> None:
    """Create procrastinate's tables and functions unless the database has them, and the
    table workers write their runs' run logs to."""
    import psycopg

    from gated_react.cli.live.run_log import STORE_SCHEMA

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
    return app.tasks[TASK].configure(lock=thread_id, queueing_lock=queueing_lock)


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
