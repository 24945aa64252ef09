"""Many workers, one Postgres: a procrastinate job queue whose one task advances a thread.

    python -m gated_react.workers --store postgresql://.../runs --graph myapp.agent:make_graph -n 8

``make_graph(checkpointer)`` builds the graph (model, tools, policy) with the checkpointer the
worker gives it. A job names a thread: it starts the run if the thread is new, else resumes it,
under the thread lock. Jobs of one thread never run at once (procrastinate's job lock), so a
retried or repeated job continues the run instead of running it twice. Runs and queue live in
the same database; the queue's tables are created on first use.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import procrastinate
from langgraph.checkpoint.base import BaseCheckpointSaver
from procrastinate.exceptions import ProcrastinateException
from procrastinate.schema import SchemaManager

from gated_react.checkpoint import StoreError, StoreURL, aopen_checkpointer
from gated_react.errors import exception_line
from gated_react.runs import NO_ANSWER, Graph, ThreadExists, aresume, arun, saver_of
from gated_react.state import ThreadResult

QUEUE = "gated-react"
TASK = "gated_react.advance"
GraphFactory = Callable[[BaseCheckpointSaver[Any]], Graph]


async def advance(
    context: procrastinate.JobContext,
    thread_id: str,
    goal: str | None = None,
    answer: Any = NO_ANSWER,
    question: str | None = None,
) -> str:
    """The job: start the run on a new thread, else continue it (answering its question)."""
    graph: Graph = context.additional_context["graph"]
    if goal is not None:
        with contextlib.suppress(ThreadExists):  # a repeated start job continues the run
            return _status(await arun(graph, goal, thread_id=thread_id))
    # A retried job may have used its answer already: unless the answer names its question,
    # never let it answer a newer one.
    if answer is NO_ANSWER or (question is None and context.job.attempts > 0):
        return _status(await aresume(graph, thread_id))
    return _status(await aresume(graph, thread_id, answer, question=question))


def _status(result: ThreadResult) -> str:
    if result["pending"]:
        return "waiting for an answer"
    return str(result["stop_reason"])


def queue_store(url: str) -> StoreURL:
    """The parsed store URL; the queue needs Postgres."""
    store = StoreURL.parse(url)
    if store.kind != "postgres":
        raise StoreError(f"store {store.shown}: workers need a postgresql:// store")
    return store


def make_app(url: str) -> procrastinate.App:
    """The queue on the Postgres database at ``url`` (small pools: many workers share it)."""
    store = queue_store(url)
    connector = procrastinate.PsycopgConnector(conninfo=store.target, min_size=1, max_size=4)
    app = procrastinate.App(connector=connector)
    app.task(name=TASK, queue=QUEUE, pass_context=True)(advance)
    return app


_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(1735549284, 2)"  # one installer at a time


def install_queue(url: str) -> None:
    """Create procrastinate's tables and functions unless the database has them."""
    import psycopg

    store = queue_store(url)
    schema = SchemaManager.get_schema()
    try:
        with psycopg.connect(store.target, connect_timeout=10) as conn, conn.transaction():
            conn.execute(_SCHEMA_LOCK)
            found = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
            if found is None or found[0] is None:
                conn.execute(schema)  # procrastinate's own SQL, applied once
    except psycopg.Error as exc:
        line = exception_line(exc, first_only=True)
        raise StoreError(f"store {store.shown}: {line}") from None


def _deferrer(app: procrastinate.App, thread_id: str) -> Any:
    return app.tasks[TASK].configure(lock=thread_id)


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
) -> None:
    """Queue a resume; ``answer`` replies to the question the paused run waits on (only to the
    one whose ``id`` is ``question``, if given: a repeated answer then never answers another)."""
    kwargs: dict[str, Any] = {"thread_id": thread_id}
    if answer is not NO_ANSWER:
        kwargs["answer"] = answer
    if question is not None:
        kwargs["question"] = question
    _deferrer(app, thread_id).defer(**kwargs)


def load_factory(path: str) -> GraphFactory:
    """``module:function`` -> the function; a clear one-line error otherwise."""
    module_name, _, name = path.partition(":")
    if not module_name or not name:
        raise ValueError(f"graph factory {path!r}: expected module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"graph factory {path!r}: cannot import {module_name}: {exc}") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ValueError(f"graph factory {path!r}: {module_name} has no function {name}")
    return factory  # type: ignore[no-any-return]


async def _recover_stalled(app: procrastinate.App, stalled_after: float) -> None:
    """Requeue jobs whose worker died (no heartbeat): the thread continues where it stopped."""
    while True:
        jobs = await app.job_manager.get_stalled_jobs(
            task_name=TASK, seconds_since_heartbeat=stalled_after
        )
        for job in jobs:
            with contextlib.suppress(ProcrastinateException):  # another worker was first
                await app.job_manager.retry_job(job)
        await asyncio.sleep(stalled_after / 2)


async def work(
    url: str,
    factory: GraphFactory,
    *,
    concurrency: int = 1,
    burst: bool = False,
    stalled_after: float = 30.0,
    name: str = "worker",
) -> None:
    """Run one worker until stopped (SIGINT/SIGTERM), or until the queue is empty (``burst``)."""
    install_queue(url)
    app = make_app(url)
    async with aopen_checkpointer(url) as saver, app.open_async():
        graph = factory(saver)
        if saver_of(graph) is not saver:
            raise ValueError("the graph factory must pass its checkpointer to build_graph")
        recover = asyncio.create_task(_recover_stalled(app, stalled_after))
        try:
            await app.run_worker_async(
                queues=[QUEUE],
                name=name,
                concurrency=concurrency,
                wait=not burst,
                additional_context={"graph": graph},
                update_heartbeat_interval=stalled_after / 3,
                stalled_worker_timeout=stalled_after,
            )
        finally:
            recover.cancel()


def start_workers(
    url: str, factory: str, processes: int, *, burst: bool = False, stalled_after: float = 30.0
) -> list[subprocess.Popen[bytes]]:
    """Start ``processes`` worker processes; stop them with ``terminate()`` (they finish the
    job at hand) and ``wait()``."""
    command = [sys.executable, "-m", "gated_react.workers", "--store", url, "--graph", factory]
    command += ["--stalled-after", str(stalled_after)] + (["--burst"] if burst else [])
    return [  # own sessions: a terminal's Ctrl-C reaches the supervisor, which stops each once
        subprocess.Popen([*command, "--name", f"worker-{index}"], start_new_session=True)
        for index in range(processes)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gated_react.workers``: run one worker, or supervise ``-n`` of them."""
    parser = argparse.ArgumentParser(prog="python -m gated_react.workers", description=__doc__)
    parser.add_argument("--store", required=True, help="postgresql:// URL for runs and queue")
    parser.add_argument("--graph", required=True, help="graph factory, module:function")
    parser.add_argument("-n", "--processes", type=int, default=1, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=1, help="jobs at once per process")
    parser.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    parser.add_argument("--stalled-after", type=float, default=30.0, help="heartbeat timeout")
    parser.add_argument("--name", default="worker", help="worker name (logs)")
    args = parser.parse_args(argv)
    try:
        queue_store(args.store)
        factory = load_factory(args.graph)
        if args.processes > 1:
            return _supervise(args)
        asyncio.run(
            work(
                args.store,
                factory,
                concurrency=args.concurrency,
                burst=args.burst,
                stalled_after=args.stalled_after,
                name=args.name,
            )
        )
    except (StoreError, ValueError) as exc:
        print(f"gated-react worker: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _supervise(args: argparse.Namespace) -> int:
    procs = start_workers(
        args.store, args.graph, args.processes, burst=args.burst, stalled_after=args.stalled_after
    )

    def stop(*_: object) -> None:  # one graceful stop each: workers finish the job at hand
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return max(proc.wait() for proc in procs)


if __name__ == "__main__":  # run from the imported module, so the app is not built in __main__
    from gated_react.workers import main as _main

    raise SystemExit(_main())
