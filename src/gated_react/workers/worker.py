"""One worker process: the graph built once, procrastinate's worker loop, stalled-job recovery."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable
from typing import Any

import procrastinate
from langgraph.checkpoint.base import BaseCheckpointSaver
from procrastinate.exceptions import ProcrastinateException

from gated_react.checkpoint import aopen_checkpointer
from gated_react.otel import setup_tracing
from gated_react.runs import Graph, saver_of
from gated_react.settings import Settings
from gated_react.workers.queue import QUEUE, TASK, install_queue, make_app

GraphFactory = Callable[[BaseCheckpointSaver[Any]], Graph]


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
    """Run one worker until stopped (SIGINT/SIGTERM), or until the queue is empty (``burst``).
    Its runs' spans go where the ``OTEL_*`` settings say."""
    setup_tracing(Settings())
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
