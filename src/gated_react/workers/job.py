"""The one task: advance a thread (start its run, or resume it, answering its question), and
when a job that did not reach its run's end is tried again.

Only a run's own end (any stop reason, or a pause for a human) finishes a job. A job that
failed because the infrastructure failed (the store lost or unreachable, the thread held by
another advancer) is retried with backoff for as long as it takes, and a job whose worker died
is tried again by the stalled-job recovery (``worker.py``); the resumed run continues from its
last checkpoint, and a non-idempotent call it may have made is settled by the run's record: a
human is asked (``outcome_unknown``) where the tool is under approval, else the run stops with
``tool_outcome_unknown`` instead of running it twice. An answer job tried again finds its
question answered by its earlier try and continues the run without it; a second answer job to
the same question (a double click) is refused. Any other exception is a defect in the graph or
its tools: retried a few times, then the job fails and the thread waits where it stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import procrastinate
from procrastinate.retry import BaseRetryStrategy, RetryDecision

from gated_react.errors import StrandedThread
from gated_react.records.queue import answer_refused
from gated_react.runs import (
    NO_ANSWER,
    Graph,
    NotWaiting,
    ThreadExists,
    aresume,
    arun,
    arun_book,
    config_for,
    from_snapshot,
)
from gated_react.state import ThreadResult
from gated_react.store.locks import ThreadBusy
from gated_react.store.signed import key_of
from gated_react.workers.connections import on_one_connection, store_lost
from gated_react.workers.watch import Job, Watch

BACKOFF_CAP = 60
"""Seconds: the longest wait between two tries of a job the infrastructure failed."""
DEFECT_ATTEMPTS = 3
"""Tries of a job that raised something other than an infrastructure failure."""


async def advance(
    job_context: procrastinate.JobContext,
    *,
    thread_id: str,
    goal: str | None = None,
    answer: Any = NO_ANSWER,
    question: str | None = None,
    context: Any = None,
    signature: str | None = None,
) -> str:
    """The job: start the run on a new thread, else continue it (answering its question);
    ``context`` is the run's LangGraph context (``enqueue_run(context=)``). Under a store
    key, an answer runs only with its signature (``records.queue.answer_refused``)."""
    extra = job_context.additional_context
    watch: Watch = extra["watch"]
    async with (
        watch.job(job_context, thread_id) as job,  # its log lines, counters and run log
        on_one_connection(extra["graph"], extra["pool"]) as graph,
    ):
        job.saver = graph.checkpointer
        if answer is not NO_ANSWER:
            key = key_of(graph.checkpointer)
            refused = answer_refused(key, signature, thread_id=thread_id, question=question,
                                     answer=answer, context=context)  # fmt: skip
            if refused is not None:  # nothing runs; the run goes on waiting for its answer
                job.refuse(refused)
                return refused
        attempts = job_context.job.attempts
        asked = _Asked(goal, answer, question, context)
        return await _advance(watch.timed(graph), thread_id, asked, attempts=attempts, job=job)


@dataclasses.dataclass(frozen=True, slots=True)
class _Asked:
    """What a job was queued with."""

    goal: str | None
    answer: Any
    question: str | None
    context: Any


async def _advance(graph: Graph, thread_id: str, asked: _Asked, *, attempts: int, job: Job) -> str:
    watch, context = job.on_update, asked.context
    if asked.goal is not None:
        with contextlib.suppress(ThreadExists):  # a repeated start job continues the run
            started = await arun(
                graph, asked.goal, thread_id=thread_id, on_update=watch, context=context
            )
            return _status(job.done(started))
    job.before = await _stored(graph, thread_id)
    # A retried job may have used its answer already: unless the answer names its question,
    # never let it answer a newer one.
    answer = NO_ANSWER if asked.question is None and attempts > 0 else asked.answer
    try:
        result = await aresume(
            graph, thread_id, answer, question=asked.question, on_update=watch, context=context
        )
    except NotWaiting as refused:
        if attempts == 0:  # a repeated answer: the run is untouched and goes on waiting
            job.refuse(f"answer refused: {refused}")
            return f"answer refused: {refused}"
        # An earlier try of this job gave the answer and was cut short (its worker killed,
        # its store lost): the run goes on from its last checkpoint, and its record settles
        # a call that try began (asked again under approval, else tool_outcome_unknown).
        job.note("resumed", _TAKEN_BEFORE)
        result = await aresume(graph, thread_id, on_update=watch, context=context)
    except StrandedThread as stranded:  # left in a step by an old release: no try can continue it
        job.refuse(str(stranded))
        return str(stranded)
    return _status(job.done(result))


_TAKEN_BEFORE = (
    "an earlier try of this job gave its answer and was cut short; the run continues from "
    "its last checkpoint"
)


async def _stored(graph: Graph, thread_id: str) -> ThreadResult | None:
    """The thread as stored before the job continues it (None if it has no run yet)."""
    snapshot = await graph.aget_state(config_for(thread_id))
    if not snapshot.values:
        return None
    return from_snapshot(snapshot, thread_id, await arun_book(graph.checkpointer, thread_id))


def _status(result: ThreadResult) -> str:
    if result["pending"]:
        return "waiting for an answer"
    return str(result["stop_reason"])


class FaultRetry(BaseRetryStrategy):
    """Infrastructure failures: again and again, 1, 2, 4 ... up to ``BACKOFF_CAP`` s apart;
    a busy thread: again in a few seconds; a defect: ``DEFECT_ATTEMPTS`` tries in all."""

    def get_retry_decision(
        self, *, exception: BaseException, job: procrastinate.jobs.Job
    ) -> RetryDecision | None:
        if isinstance(exception, ThreadBusy):
            return RetryDecision(retry_in={"seconds": min(5, 1 + job.attempts)})
        if store_lost(exception):
            return RetryDecision(retry_in={"seconds": min(BACKOFF_CAP, 2 ** min(job.attempts, 6))})
        if job.attempts + 1 < DEFECT_ATTEMPTS:
            return RetryDecision(retry_in={"seconds": 2 ** (job.attempts + 1)})
        return None
