"""The workers' queue as every host sees it: its names, the store it lives in, and enqueueing.

A job is deferred by the task's name, so a client (the CLI answering a question, an
application starting runs) needs neither the workers' code nor their graph: the workers
register the task under ``TASK`` (``gated_react.workers.make_app``) and take the jobs.

With a store key, a job that carries an answer carries its signature too (HMAC-SHA256 over the
thread, the question, the answer and the context): a worker whose store has a key refuses an
answer without one, so a row written into the queue by anyone with the database's credentials
alone never approves a call.
"""

from __future__ import annotations

import uuid
from typing import Any

import procrastinate

from gated_react.errors import StoreError, exception_line
from gated_react.records.run_log import STORE_SCHEMA
from gated_react.runs import NO_ANSWER
from gated_react.state.calls import canonical_json
from gated_react.store.checkpointer import StoreURL
from gated_react.store.key import KeyInput, StoreKey, framed_digest, store_key

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
    key: KeyInput | StoreKey | None = None,
) -> int:
    """Queue a resume; returns its job id. ``answer`` replies to the question the paused run
    waits on (only to the one whose ``id`` is ``question``, if given: a repeated answer then
    never answers another; its job ends ``refused``). With ``once`` and a ``question``, a
    second answer to it while the first waits in the queue is not queued: procrastinate's
    ``AlreadyEnqueued`` (the database decides, so two callers at once queue one).
    ``context`` as for ``enqueue_run``: a resume needs it again. An answer is signed with
    ``key``, by default ``GATED_REACT_STORE_KEY`` (unsigned without one): workers with a
    store key run only answers signed with it."""
    kwargs: dict[str, Any] = {"thread_id": thread_id}
    if context is not None:
        kwargs["context"] = context
    if answer is not NO_ANSWER:
        kwargs["answer"] = answer
        signing = _signing_key(key)
        if signing is not None:
            kwargs[SIGNATURE] = signing.sign(_answer_digest(thread_id, question, answer, context))
    lock = None
    if question is not None:
        kwargs["question"] = question
        lock = _answer_lock(thread_id, question) if once else None
    return int(_deferrer(app, thread_id, lock).defer(**kwargs))


SIGNATURE = "signature"
"""The job argument that holds an answer's signature."""


def answer_refused(
    key: StoreKey | None,
    signature: Any,
    *,
    thread_id: str,
    question: str | None,
    answer: Any,
    context: Any = None,
) -> str | None:
    """Why a worker holding ``key`` must not take a queued answer (one line), or None: it
    carries no signature, or one this key does not make for it. Without a key, nothing is."""
    if key is None:
        return None
    if not isinstance(signature, str):
        return (
            "answer refused: the job carries no signature, and this worker's store has a key "
            "(queue answers with gated-react answer, or enqueue_resume under the store key)"
        )
    if not key.holds(_answer_digest(thread_id, question, answer, context), signature):
        return (
            "answer refused: the job's signature does not match its thread, question and "
            "answer under this worker's store key (changed in the queue, or signed with "
            "another key)"
        )
    return None


def _answer_digest(thread_id: str, question: str | None, answer: Any, context: Any) -> bytes:
    return framed_digest("gated-react/queued-answer/1", TASK, thread_id, question or "",
                         canonical_json(answer), canonical_json(context))  # fmt: skip


def _signing_key(key: KeyInput | StoreKey | None) -> StoreKey | None:
    """``key``, or the settings' store key when none is given."""
    if key is None:
        from gated_react.settings import Settings

        key = Settings().store_keys()
    try:
        return store_key(key)
    except ValueError as exc:
        raise StoreError(str(exc)) from None
