"""The workers' side of the queue: the procrastinate app that runs the task.

Its names, its tables and enqueueing are every host's (``gated_react.records.queue``: the
command line queues runs too); re-exported here for ``gated_react.workers``."""

from __future__ import annotations

import procrastinate

from gated_react.records.queue import (
    QUEUE,
    TASK,
    connector,
    enqueue_resume,
    enqueue_run,
    install_queue,
    queue_store,
)
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
