"""Many workers, one Postgres: a procrastinate job queue whose one task advances a thread.

    python -m gated_react.workers --store postgresql://.../runs --graph myapp.agent:make_graph -n 8

``make_graph(checkpointer)`` builds the graph (model, tools, policy) with the checkpointer the
worker gives it. A job names a thread: it starts the run if the thread is new, else resumes it,
under the thread lock. Jobs of one thread never run at once (procrastinate's job lock), so a
retried or repeated job continues the run instead of running it twice. Runs and queue live in
the same database; the queue's tables are created on first use.
"""

from __future__ import annotations

from gated_react.workers.command import main
from gated_react.workers.job import advance
from gated_react.workers.queue import (
    QUEUE,
    TASK,
    enqueue_resume,
    enqueue_run,
    install_queue,
    make_app,
    queue_store,
)
from gated_react.workers.supervisor import start_workers
from gated_react.workers.worker import GraphFactory, load_factory, work

__all__ = [
    "QUEUE",
    "TASK",
    "GraphFactory",
    "advance",
    "enqueue_resume",
    "enqueue_run",
    "install_queue",
    "load_factory",
    "main",
    "make_app",
    "queue_store",
    "start_workers",
    "work",
]
