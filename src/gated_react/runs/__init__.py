"""Start, resume and read runs by thread id, one advancer per thread.

Every function returns the same shape, ``ThreadResult``: the graph's result (``status``,
``stop_reason``, ``message``, ``answer``, ``history``, ``trace``, ``usage``) plus ``thread_id`` and
``pending``, the questions a paused run waits on (empty unless a human must answer), each with
its ``id``; ``status`` is ``"paused"`` while there are any.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.runnables import RunnableConfig

from gated_react.runs.advancing import (
    NO_ANSWER,
    NotWaiting,
    OnUpdate,
    ThreadExists,
    UnknownThread,
    aadvance,
    advance,
    check_new,
    resume_input,
    settled,
)
from gated_react.runs.reading import (
    Graph,
    afrom_output,
    arun_book,
    astored_channels,
    config_for,
    context_of,
    from_output,
    from_snapshot,
    run_book,
    saver_of,
    shape,
    stored_channels,
)
from gated_react.state import ThreadResult
from gated_react.store.locks import athread_lock, thread_lock

__all__ = [
    "NO_ANSWER",
    "Graph",
    "NotWaiting",
    "OnUpdate",
    "ThreadExists",
    "UnknownThread",
    "aread",
    "aresult_of",
    "aresume",
    "arun",
    "arun_book",
    "arun_context",
    "config_for",
    "from_snapshot",
    "read",
    "result_of",
    "resume",
    "run",
    "run_book",
    "run_context",
    "saver_of",
    "shape",
]


def result_of(
    graph: Graph, output: dict[str, Any], config: RunnableConfig | None = None
) -> ThreadResult:
    """What ``graph.invoke(..., config)`` returned, as ``run`` returns it: with the run's
    answer, history, trace and usage, read from its conversation and record.

    The run is the one the output answers, named by its last question (human message). A
    graph without a checkpointer makes each invocation a run of its own, named by its question
    and a nonce the output does not hold: the newest run on that question is read. So two
    invocations on the same thread id (or none) with the same question, which only input
    messages with the same ids (or with none: theirs are made from their content) can share,
    are read as the newer one, while the process keeps its record."""
    thread = str((config or {}).get("configurable", {}).get("thread_id"))
    return from_output(graph, output, thread)


async def aresult_of(
    graph: Graph, output: dict[str, Any], config: RunnableConfig | None = None
) -> ThreadResult:
    """Async twin of ``result_of`` (for a graph whose checkpointer is async)."""
    thread = str((config or {}).get("configurable", {}).get("thread_id"))
    return await afrom_output(graph, output, thread)


def run(
    graph: Graph,
    goal: str,
    *,
    thread_id: str | None = None,
    on_update: OnUpdate | None = None,
    context: Any = None,
) -> ThreadResult:
    """Start a run on a new thread (a fresh id unless given) and return its result.
    ``on_update`` sees every node's update as it happens (the run is streamed); ``context`` is
    the run's LangGraph context (``build_graph(context_schema=)``, what tools read as
    ``ToolRuntime.context``)."""
    thread_id = thread_id or uuid.uuid4().hex
    config = config_for(thread_id)
    with thread_lock(saver_of(graph), thread_id):
        check_new(graph, graph.get_state(config) if saver_of(graph) else None, thread_id)
        output = advance(graph, {"goal": goal}, config, on_update, context)
        return from_output(graph, output, thread_id)


def resume(
    graph: Graph,
    thread_id: str,
    answer: Any = NO_ANSWER,
    *,
    question: str | None = None,
    on_update: OnUpdate | None = None,
    context: Any = None,
) -> ThreadResult:
    """Continue a crashed, killed or paused run where it stopped; ``answer`` replies to the
    question a paused run waits on (``NotWaiting`` if it waits on none, or on another one than
    the ``question`` id given). A finished run is returned unchanged and nothing runs.
    ``context`` as for ``run`` (LangGraph keeps none between invocations: pass it again)."""
    config = config_for(thread_id)
    with thread_lock(saver_of(graph), thread_id):
        snapshot = graph.get_state(config)
        stored = stored_channels(graph, snapshot)
        if settled(snapshot, thread_id, answer, question, stored):
            book = run_book(saver_of(graph), thread_id)
            return from_snapshot(snapshot, thread_id, book, stored)
        output = advance(graph, resume_input(graph, answer), config, on_update, context)
        return from_output(graph, output, thread_id)


async def arun(
    graph: Graph,
    goal: str,
    *,
    thread_id: str | None = None,
    on_update: OnUpdate | None = None,
    context: Any = None,
) -> ThreadResult:
    """Async ``run``."""
    thread_id = thread_id or uuid.uuid4().hex
    config = config_for(thread_id)
    async with athread_lock(saver_of(graph), thread_id):
        snapshot = await graph.aget_state(config) if saver_of(graph) else None
        check_new(graph, snapshot, thread_id)
        output = await aadvance(graph, {"goal": goal}, config, on_update, context)
        return await afrom_output(graph, output, thread_id)


async def aresume(
    graph: Graph,
    thread_id: str,
    answer: Any = NO_ANSWER,
    *,
    question: str | None = None,
    on_update: OnUpdate | None = None,
    context: Any = None,
) -> ThreadResult:
    """Async ``resume``."""
    config = config_for(thread_id)
    async with athread_lock(saver_of(graph), thread_id):
        snapshot = await graph.aget_state(config)
        stored = await astored_channels(graph, snapshot)
        if settled(snapshot, thread_id, answer, question, stored):
            book = await arun_book(saver_of(graph), thread_id)
            return from_snapshot(snapshot, thread_id, book, stored)
        output = await aadvance(graph, resume_input(graph, answer), config, on_update, context)
        return await afrom_output(graph, output, thread_id)


def read(graph: Graph, thread_id: str) -> ThreadResult:
    """The stored result of a thread, finished or not, without running anything."""
    snapshot = graph.get_state(config_for(thread_id))
    if not snapshot.values:
        raise UnknownThread(thread_id)
    book = run_book(saver_of(graph), thread_id)
    stored = stored_channels(graph, snapshot, finished=not book.records)
    return from_snapshot(snapshot, thread_id, book, stored)


async def aread(graph: Graph, thread_id: str) -> ThreadResult:
    """Async twin of ``read`` (for a graph whose checkpointer is async)."""
    snapshot = await graph.aget_state(config_for(thread_id))
    if not snapshot.values:
        raise UnknownThread(thread_id)
    book = await arun_book(saver_of(graph), thread_id)
    stored = await astored_channels(graph, snapshot, finished=not book.records)
    return from_snapshot(snapshot, thread_id, book, stored)


def run_context(graph: Graph, thread_id: str) -> dict[str, Any] | None:
    """What the thread's latest run ran under (``RunContext``'s fields as plain JSON: the
    model's class, name and masked base URL, the protocol, the policy and its hash, where its
    prices came from, the version), as its first decision recorded it; None before a run
    opened on the thread."""
    return context_of(run_book(saver_of(graph), thread_id))


async def arun_context(graph: Graph, thread_id: str) -> dict[str, Any] | None:
    """Async twin of ``run_context`` (for a graph whose checkpointer is async)."""
    return context_of(await arun_book(saver_of(graph), thread_id))
