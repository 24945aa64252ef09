"""The workers' queue as every host sees it: its names, the store it lives in, and enqueueing.

A job is deferred by the task's name, so a client (the CLI answering a question, an
application starting runs) needs neither the workers' code nor their graph: the workers
register the task under ``TASK`` (``gated_react.workers.make_app``) and take the jobs.
"""

from __future__ import annotations

import uuid
from typing import Any

import procrastinate

from gated_react.checkpoint import StoreError, StoreURL
from gated_react.runs import NO_ANSWER

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


def _deferrer(app: procrastinate.App, thread_id: str) -> Any:
    """Jobs of one thread never run at once: procrastinate's job lock is the thread id."""
    return app.configure_task(TASK, queue=QUEUE, lock=thread_id)


def enqueue_run(app: procrastinate.App, goal: str, *, thread_id: str | None = None) -> str:
    """Queue a new run (the app must be open); returns its thread id."""
    thread_id = thread_id or uuid.uuid4().hex
    _deferrer(app, thread_id).defer(thread_id=thread_id, goal=goal)
    return thread_id


def enqueue_resume(
    app: procrastinate.App,
    thread_id: str,
    answer: Any = NO_ANSWER,
    *,
    question: str | None = None,
) -> int:
    """Queue a resume; returns its job id. ``answer`` replies to the question the paused run
    waits on (only to the one whose ``id`` is ``question``, if given: a repeated answer then
    never answers another)."""
    kwargs: dict[str, Any] = {"thread_id": thread_id}
    if answer is not NO_ANSWER:
        kwargs["answer"] = answer
    if question is not None:
        kwargs["question"] = question
    return int(_deferrer(app, thread_id).defer(**kwargs))
