"""One worker process: the graph built once per connection to the store, procrastinate's worker
loop, stalled-job recovery, and the way back after the store was lost.

A worker outlives its store: when Postgres restarts, drops every client or is down for a while,
the worker lets the jobs at hand end (they fail and are retried, see ``job.py``), records their
ends once the store answers again, and starts its loop anew, 1, 2, 4 ... up to
``RESTART_CAP`` seconds apart, until the store is back. It never exits for it. SIGTERM or SIGINT
stops it gracefully (the jobs at hand finish); a second one stops it at once (those jobs are
then recovered by another worker once ``stalled_after`` has passed without a heartbeat).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import procrastinate
from langgraph.checkpoint.base import BaseCheckpointSaver
from procrastinate.exceptions import ProcrastinateException
from procrastinate.jobs import Status
from procrastinate.worker import Worker

from gated_react.errors import exception_line
from gated_react.hosting.otel import setup_tracing
from gated_react.runs import Graph, saver_of
from gated_react.settings import Settings
from gated_react.workers import heartbeat, stacks
from gated_react.workers import log as worker_log
from gated_react.workers.connections import check_key, open_pool, pool_saver, store_lost
from gated_react.workers.queue import QUEUE, TASK, install_queue, make_app, queue_store
from gated_react.workers.watch import Options, Watch, observed

GraphFactory = Callable[[BaseCheckpointSaver[Any]], Graph]
RESTART_CAP = 30.0
"""Seconds: the longest wait before a worker that lost its store tries again."""


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


def built(factory: GraphFactory, saver: Any) -> Any:
    """The factory's graph; one that raises is a worker that cannot start (a ``ValueError``:
    exit 2, and the supervisor stops the fleet, as replacing it cannot help)."""
    try:
        return factory(saver)
    except Exception as exc:
        name = getattr(factory, "__qualname__", repr(factory))
        why = exception_line(exc, first_only=True)
        raise ValueError(f"graph factory {name} raised {type(exc).__name__}: {why}") from None


def backoff(cap: float) -> Iterator[float]:
    """1, 2, 4 ... seconds, then ``cap`` for ever."""
    pause = 1.0
    while True:
        yield min(pause, cap)
        pause *= 2


class _Worker(Worker):
    """procrastinate's worker, three things kept: a job's end recorded once the store answers
    again, why the loop ended (a side task such as the listener or heartbeat failing), and the
    worker's row, registered again at its next beat or fetch if another worker pruned it
    (``heartbeat``)."""

    lost: BaseException | None = None

    def __init__(self, app: procrastinate.App, **options: Any) -> None:
        super().__init__(app, **options)
        fetch = app.job_manager.fetch_job

        async def fetch_job(queues: Any, worker_id: int) -> Any:
            try:
                return await fetch(queues=queues, worker_id=worker_id)
            except ProcrastinateException as exc:
                if not heartbeat.pruned(exc):
                    raise
            again = self.worker_id  # registered again by a beat since, or now
            if again is None or again == worker_id:
                again = await self._register_again()
            return await fetch(queues=queues, worker_id=again)

        # Pruned since its last beat, the worker's fetch names a row that is gone: the jobs'
        # foreign key refuses it. This app is this worker's alone (``_serve``).
        app.job_manager.fetch_job = fetch_job  # type: ignore[method-assign]

    def jobs_at_hand(self) -> set[int]:
        return {int(context.job.id) for context in self._running_jobs.values() if context.job.id}

    async def _update_heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.update_heartbeat_interval)
            assert self.worker_id is not None
            if not await heartbeat.beat(self.app, self.worker_id):
                await self._register_again()

    async def _register_again(self) -> int:
        at_hand, was = self.jobs_at_hand(), self.worker_id or 0
        worker_id, kept = await heartbeat.register_again(self.app, at_hand)
        self.worker_id = worker_id
        name = self.worker_name or "worker"
        worker_log.registered_again(name, was, worker_id, len(kept), len(at_hand) - len(kept))
        return worker_id

    async def _persist_job_status(self, *args: Any, **kwargs: Any) -> None:
        name, tries = self.worker_name or "worker", 0
        job, failed = kwargs.get("job"), kwargs.get("status") is Status.FAILED
        if failed and job is not None and await heartbeat.taken_over(self.app, job):
            # Its retry would requeue a job another try runs (or has finished: the store
            # refuses it, an error no one reads); that try records the job's end.
            return
        for pause in backoff(10.0):
            try:
                await super()._persist_job_status(*args, **kwargs)
            except Exception as exc:
                if not store_lost(exc):
                    raise
                tries += 1
                worker_log.connection_lost(name, exc, what="queue", retry_in=pause)
                await asyncio.sleep(pause)
                continue
            if tries:  # a job's end recorded after the store came back
                worker_log.reconnected(name, what="queue", attempts=tries + 1)
            return

    async def _monitor_side_tasks(self, side_tasks: list[asyncio.Task[Any]]) -> None:
        await super()._monitor_side_tasks(side_tasks)
        for task in side_tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                self.lost = task.exception()


async def _recover_stalled(worker: _Worker, stalled_after: float) -> None:
    """Requeue jobs whose worker died (no heartbeat): the thread continues where it stopped.
    Never this worker's own jobs at hand: pruned, it registers again and takes them back."""
    app = worker.app
    while True:
        try:
            jobs = await app.job_manager.get_stalled_jobs(
                task_name=TASK, seconds_since_heartbeat=stalled_after
            )
            for job in (job for job in jobs if job.id not in worker.jobs_at_hand()):
                with contextlib.suppress(ProcrastinateException):  # another worker was first
                    await app.job_manager.retry_job(job)
        except Exception as exc:
            if not store_lost(exc):
                raise
        await asyncio.sleep(stalled_after / 2)


async def work(
    url: str,
    factory: GraphFactory,
    *,
    concurrency: int = 1,
    burst: bool = False,
    stalled_after: float = 30.0,
    name: str = "worker",
    observe: Options | None = None,
) -> None:
    """Run one worker until stopped (SIGINT/SIGTERM), or until the queue is empty (``burst``),
    through any loss of the store. Its runs' spans go where the ``OTEL_*`` settings say; it
    logs, logs its runs and answers probes as ``observe`` says (``watch.py``)."""
    setup_tracing(Settings())
    stopping = asyncio.Event()
    _on_signals(stopping)
    pauses = backoff(RESTART_CAP)
    options = {
        "queues": [QUEUE],
        "name": name,
        "concurrency": concurrency,
        "wait": not burst,
        "update_heartbeat_interval": stalled_after / 3,
        "stalled_worker_timeout": stalled_after,
        "install_signal_handlers": False,
    }
    target = queue_store(url).target
    with stacks.showing():  # kill -USR1: where each thread and task waits
        async with observed(
            name, observe or Options(), stalled_after=stalled_after, store=target
        ) as watch:
            while not stopping.is_set():
                began = time.monotonic()
                try:
                    lost = await _serve(url, factory, stopping, watch, options)
                except Exception as exc:
                    if not store_lost(exc):
                        raise
                    lost = exc
                if lost is None:
                    return
                if time.monotonic() - began > 2 * RESTART_CAP:  # a new fault, not this one going on
                    pauses = backoff(RESTART_CAP)
                pause = next(pauses)
                worker_log.connection_lost(name, lost, retry_in=pause)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), pause)


async def _serve(
    url: str,
    factory: GraphFactory,
    stopping: asyncio.Event,
    watch: Watch,
    options: dict[str, Any],
) -> BaseException | None:
    """One life of the worker loop on one connection to the store; what ended it, if the store."""
    await asyncio.to_thread(install_queue, url)  # blocking: its connect waits up to 10 s
    watch.store_answers()  # after a loss: the line that says it is back
    app = make_app(url)
    async with open_pool(url, options["concurrency"]) as pool, app.open_async():
        saver = pool_saver(pool, Settings().store_keys())
        await check_key(saver)
        graph = built(factory, saver)
        if saver_of(graph) is not saver:
            raise ValueError("the graph factory must pass its checkpointer to build_graph")
        context = {"graph": graph, "pool": pool, "watch": watch}
        worker = _Worker(app, additional_context=context, **options)
        recover = asyncio.create_task(_recover_stalled(worker, options["stalled_worker_timeout"]))
        try:
            await _run_until_stopped(worker, stopping)
        finally:
            recover.cancel()
    return None if stopping.is_set() else worker.lost


async def _run_until_stopped(worker: _Worker, stopping: asyncio.Event) -> None:
    run = asyncio.create_task(worker.run())  # type: ignore[no-untyped-call]
    asked = asyncio.create_task(stopping.wait())
    try:
        await asyncio.wait({run, asked}, return_when=asyncio.FIRST_COMPLETED)
        while not run.done():  # asked to stop; run() forgets a stop asked before it began
            worker.stop()  # type: ignore[no-untyped-call]
            await asyncio.wait({run}, timeout=1.0)
        run.result()
    finally:
        asked.cancel()


def _on_signals(stopping: asyncio.Event) -> None:
    """The first SIGTERM/SIGINT stops gracefully, a second at once."""
    loop = asyncio.get_running_loop()

    def on_signal(number: int) -> None:
        if stopping.is_set():
            os._exit(128 + number)  # the jobs at hand are recovered as stalled
        stopping.set()

    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, on_signal, number)
