"""A thread's result read back: its state's values with what its run's record says (the
answer, history, trace and usage), the questions it waits on, and the record itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Interrupt, StateSnapshot
from pydantic import ValidationError

from gated_react._engine.authority import audit
from gated_react._engine.authority.ledger import Book, ledger_for
from gated_react._engine.conversation.steps import stranded
from gated_react.errors import stranded_line
from gated_react.state import RESULT_KEYS, Question, RunResult, ThreadResult, Usage
from gated_react.stops import ended_status
from gated_react.store.rows import record_thread

Graph = CompiledStateGraph[Any, Any, Any, Any]


def saver_of(graph: Graph) -> BaseCheckpointSaver[Any] | None:
    """The graph's checkpointer, if it was compiled with one."""
    saver = graph.checkpointer
    return saver if isinstance(saver, BaseCheckpointSaver) else None


def config_for(thread_id: str) -> RunnableConfig:
    """The config that addresses one thread."""
    return {"configurable": {"thread_id": thread_id}}


def shape(
    values: dict[str, Any],
    thread_id: str,
    pending: list[Question],
    book: Book | None = None,
    unfinished: bool = False,
) -> ThreadResult:
    """The result shape from a state's values and its open interrupts, with what the run's
    record (``book``) and conversation say of it (its answer, history, trace and usage).
    ``unfinished``: the thread has nodes left to run, so the end its values show is an
    earlier run's."""
    empty = RunResult().model_dump(mode="json")
    out = {key: values.get(key, empty[key]) for key in RESULT_KEYS}
    if unfinished or pending:
        out |= {"status": None, "stop_reason": None, "message": None}
    status = ended_status(out) or ("paused" if pending else None)
    book = book or Book()
    derived = {
        "answer": audit.answer(out),
        "history": [e.model_dump(mode="json") for e in audit.history(out["messages"])],
        "trace": [
            e.model_dump(mode="json", exclude_none=True)
            for e in audit.trace(book.records, book.tally.unkeyed, book.tally.superseded.keys())
        ],
        "usage": book.tally.usage().model_dump(mode="json"),
    }
    return cast(
        ThreadResult,
        {**out, **derived, "status": status, "thread_id": thread_id, "pending": pending},
    )


def run_book(saver: Any, thread_id: str) -> Book:
    """The record of the thread's latest run (an empty one when it has none)."""
    return ledger_for(saver).last(record_thread(thread_id))


async def arun_book(saver: Any, thread_id: str) -> Book:
    """Async twin of ``run_book`` (an async saver's records are read with await)."""
    return await ledger_for(saver).alast(record_thread(thread_id))


def output_book(saver: Any, thread_id: str, output: dict[str, Any]) -> Book:
    """The record of the run ``output`` answers (``result_of`` says which; with no question
    in it, the thread's latest run's, and none for a graph without a checkpointer)."""
    ledger, question = ledger_for(saver), audit.question(output.get("messages") or [])
    thread_id = record_thread(thread_id)
    if question is None:
        return ledger.last(thread_id) if saver is not None else Book()
    if saver is not None:
        return ledger.book(thread_id, question)
    run = audit.newest_run(ledger.about([question]), thread_id, question)
    return ledger.book(thread_id, run) if run is not None else Book()


async def aoutput_book(saver: Any, thread_id: str, output: dict[str, Any]) -> Book:
    """Async twin of ``output_book``."""
    ledger, question = ledger_for(saver), audit.question(output.get("messages") or [])
    thread_id = record_thread(thread_id)
    if question is None:
        return await ledger.alast(thread_id) if saver is not None else Book()
    if saver is not None:
        return await ledger.abook(thread_id, question)
    run = audit.newest_run(await ledger.aabout([question]), thread_id, question)
    return await ledger.abook(thread_id, run) if run is not None else Book()


def questions(interrupts: Sequence[Interrupt]) -> list[Question]:
    """The open questions, each with the id that an answer may name (``resume(question=)``)."""
    return [
        cast(Question, {**i.value, "id": i.id} if isinstance(i.value, dict) else i.value)
        for i in interrupts
    ]


def from_snapshot(
    snapshot: StateSnapshot,
    thread_id: str,
    book: Book | None = None,
    stored: Mapping[str, Any] | None = None,
) -> ThreadResult:
    """The result shape of a stored thread (``book``: its latest run's record; ``stored``: its
    checkpoint's channels, to say so of a thread no answer can continue)."""
    pending = questions(snapshot.interrupts)
    ended = book is not None and book.tally.ended is not None
    out = shape(
        snapshot.values, thread_id, pending, book, unfinished=bool(snapshot.next) and not ended
    )
    if stored and book is not None and not book.records:
        out = _spent_before_records(out, stored)
    left = None if stored is None else stranded(stored, snapshot.next)
    if left is None:
        return out
    return cast(ThreadResult, {**out, "message": stranded_line(thread_id, left)})


def _spent_before_records(out: ThreadResult, stored: Mapping[str, Any]) -> ThreadResult:
    """A thread written before runs kept a record (cef713a and earlier) kept its spend in a
    ``usage`` channel: shown as it was stored. Only shown: no budget reads it (a new run on the
    thread has budgets of its own)."""
    try:
        usage = Usage.model_validate(stored.get("usage"))
    except ValidationError:
        return out
    return cast(ThreadResult, {**out, "usage": usage.model_dump(mode="json")})


def stored_channels(
    graph: Graph, snapshot: StateSnapshot, *, finished: bool = False
) -> Mapping[str, Any]:
    """The channels of the checkpoint ``snapshot`` shows, the private ones too (empty when
    nothing is left to run, unless ``finished``)."""
    saver = saver_of(graph)
    wanted = saver is not None and (snapshot.next or finished)
    found = saver.get_tuple(snapshot.config) if wanted else None  # type: ignore[union-attr]
    return {} if found is None else found.checkpoint["channel_values"]


async def astored_channels(
    graph: Graph, snapshot: StateSnapshot, *, finished: bool = False
) -> Mapping[str, Any]:
    """Async ``stored_channels``."""
    saver = saver_of(graph)
    wanted = saver is not None and (snapshot.next or finished)
    found = await saver.aget_tuple(snapshot.config) if wanted else None  # type: ignore[union-attr]
    return {} if found is None else found.checkpoint["channel_values"]


def from_output(graph: Graph, output: dict[str, Any], thread_id: str) -> ThreadResult:
    """The result shape of what ``invoke`` returned on the thread (``result_of``)."""
    pending = questions(output.get("__interrupt__", ()))
    return shape(output, thread_id, pending, output_book(saver_of(graph), thread_id, output))


async def afrom_output(graph: Graph, output: dict[str, Any], thread_id: str) -> ThreadResult:
    """Async ``from_output``."""
    pending = questions(output.get("__interrupt__", ()))
    book = await aoutput_book(saver_of(graph), thread_id, output)
    return shape(output, thread_id, pending, book)


def has_ended(snapshot: StateSnapshot) -> bool:
    """A thread whose run ended: nothing left to run, a status and a stop reason recorded."""
    return not snapshot.next and ended_status(snapshot.values) is not None


def context_of(book: Book) -> dict[str, Any] | None:
    """What the run ``book`` records ran under (``run_context``), None before it opened."""
    opened = book.tally.opened
    return None if opened is None else dict(opened.body)
