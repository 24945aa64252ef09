"""The one task: advance a thread (start its run, or resume it, answering its question)."""

from __future__ import annotations

import contextlib
from typing import Any

import procrastinate

from gated_react.runs import NO_ANSWER, Graph, ThreadExists, aresume, arun
from gated_react.state import ThreadResult


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
