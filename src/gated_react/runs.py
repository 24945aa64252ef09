"""Start, resume and read runs by thread id, one advancer per thread.

Every function returns the same shape, ``ThreadResult``: the graph's result (``status``,
``stop_reason``, ``message``, ``answer``, ``history``, ``trace``, ``usage``) plus ``thread_id`` and
``pending``, the questions a paused run waits on (empty unless a human must answer), each with
its ``id``; ``status`` is ``"paused"`` while there are any.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt, StateSnapshot
from pydantic import ValidationError

from gated_react._engine.authority import audit
from gated_react._engine.authority.ledger import Book, ledger_for
from gated_react._engine.conversation.steps import stranded
from gated_react.answers import UNUSABLE_ANSWER
from gated_react.errors import GatedReactError, StrandedThread, one_line, stranded_line
from gated_react.state import CHANNELS, RESULT_KEYS, Question, RunResult, ThreadResult, Usage
from gated_react.stops import ended_status
from gated_react.store.locks import athread_lock, thread_lock

Graph = CompiledStateGraph[Any, Any, Any, Any]
OnUpdate = Callable[[str, Any], None]
"""Called with ``(node, update)`` after every node, and ``("__interrupt__", interrupts)``."""
NO_ANSWER: Any = object()
"""The default of ``resume(answer=)``: resume without answering (distinct from ``None``)."""


class UnknownThread(GatedReactError, LookupError):
    """No run is stored under this thread id."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"no run is stored under thread {thread_id!r}")


class NotWaiting(GatedReactError, ValueError):
    """An answer was given for a thread that is not waiting for one (or not for that question)."""

    def __init__(self, thread_id: str, question: str | None = None, *, ended: bool = False) -> None:
        what = "an answer" if question is None else f"an answer to question {question!r}"
        hint = (
            "its run has ended; start a new one"
            if ended
            else "resume it without one and answer the question it asks"
        )
        super().__init__(f"thread {thread_id!r} is not waiting for {what}; {hint}")
        self.thread_id, self.question = thread_id, question


class ThreadExists(GatedReactError, ValueError):
    """A new run was asked for on a thread that already holds one."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"thread {thread_id!r} already holds a run; resume it, follow it up with a new "
            "message on the thread (from Python or a chat client), or start another thread"
        )


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
    return _from_output(graph, output, thread)


async def aresult_of(
    graph: Graph, output: dict[str, Any], config: RunnableConfig | None = None
) -> ThreadResult:
    """Async twin of ``result_of`` (for a graph whose checkpointer is async)."""
    thread = str((config or {}).get("configurable", {}).get("thread_id"))
    return await _afrom_output(graph, output, thread)


def run_book(saver: Any, thread_id: str) -> Book:
    """The record of the thread's latest run (an empty one when it has none)."""
    return ledger_for(saver).last(thread_id)


async def arun_book(saver: Any, thread_id: str) -> Book:
    """Async twin of ``run_book`` (an async saver's records are read with await)."""
    return await ledger_for(saver).alast(thread_id)


def output_book(saver: Any, thread_id: str, output: dict[str, Any]) -> Book:
    """The record of the run ``output`` answers (``result_of`` says which; with no question
    in it, the thread's latest run's, and none for a graph without a checkpointer)."""
    ledger, question = ledger_for(saver), audit.question(output.get("messages") or [])
    if question is None:
        return ledger.last(thread_id) if saver is not None else Book()
    if saver is not None:
        return ledger.book(thread_id, question)
    run = audit.newest_run(ledger.about([question]), thread_id, question)
    return ledger.book(thread_id, run) if run is not None else Book()


async def aoutput_book(saver: Any, thread_id: str, output: dict[str, Any]) -> Book:
    """Async twin of ``output_book``."""
    ledger, question = ledger_for(saver), audit.question(output.get("messages") or [])
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


async def astored_channels(graph: Graph, snapshot: StateSnapshot) -> Mapping[str, Any]:
    """Async ``stored_channels``."""
    saver = saver_of(graph)
    found = await saver.aget_tuple(snapshot.config) if saver is not None and snapshot.next else None
    return {} if found is None else found.checkpoint["channel_values"]


def _from_output(graph: Graph, output: dict[str, Any], thread_id: str) -> ThreadResult:
    pending = questions(output.get("__interrupt__", ()))
    return shape(output, thread_id, pending, output_book(saver_of(graph), thread_id, output))


async def _afrom_output(graph: Graph, output: dict[str, Any], thread_id: str) -> ThreadResult:
    pending = questions(output.get("__interrupt__", ()))
    book = await aoutput_book(saver_of(graph), thread_id, output)
    return shape(output, thread_id, pending, book)


def has_ended(snapshot: StateSnapshot) -> bool:
    """A thread whose run ended: nothing left to run, a status and a stop reason recorded."""
    return not snapshot.next and ended_status(snapshot.values) is not None


class _Watch:
    """A streamed run: passes each node's update on and keeps what ``invoke`` would return."""

    def __init__(self, on_update: OnUpdate) -> None:
        self.on_update = on_update
        self.latest: dict[str, Any] = {}
        self.interrupts: list[Any] = []

    def take(self, mode: str, chunk: Any) -> None:
        if mode == "values":
            self.latest = chunk
            return
        for node, update in chunk.items():
            if node == "__interrupt__":
                self.interrupts.extend(update)
            self.on_update(node, update)

    def output(self) -> dict[str, Any]:
        if self.interrupts:
            return {**self.latest, "__interrupt__": self.interrupts}
        return self.latest


_MODES: list[Any] = ["updates", "values"]


def _advance(
    graph: Graph,
    value: Any,
    config: RunnableConfig,
    on_update: OnUpdate | None,
    context: Any = None,
) -> dict[str, Any]:
    """``invoke``, or the same run streamed so a caller can watch every node as it finishes."""
    if on_update is None:
        output: dict[str, Any] = graph.invoke(value, config, context=context)
        return output
    watch = _Watch(on_update)
    streamed = graph.stream(
        value, config, stream_mode=_MODES, context=context, output_keys=list(CHANNELS)
    )
    for mode, chunk in streamed:
        watch.take(mode, chunk)
    return watch.output()


async def _aadvance(
    graph: Graph,
    value: Any,
    config: RunnableConfig,
    on_update: OnUpdate | None,
    context: Any = None,
) -> dict[str, Any]:
    """Async ``_advance``."""
    if on_update is None:
        output: dict[str, Any] = await graph.ainvoke(value, config, context=context)
        return output
    watch = _Watch(on_update)
    streamed = graph.astream(
        value, config, stream_mode=_MODES, context=context, output_keys=list(CHANNELS)
    )
    async for mode, chunk in streamed:
        watch.take(mode, chunk)
    return watch.output()


def _resume_input(graph: Graph, answer: Any) -> Command[Any] | None:
    """The resume command; an answer LangGraph cannot take is replaced by a stand-in that says
    why, since LangGraph stores the answer before any node could refuse it (and fails inside on
    ``None``)."""
    if answer is NO_ANSWER:
        return None
    if answer is None:
        return Command(resume={UNUSABLE_ANSWER: "None is not an answer"})
    saver = saver_of(graph)
    if saver is not None:
        try:  # read back too: a type the store will not revive would make the thread unreadable
            saver.serde.loads_typed(saver.serde.dumps_typed(answer))
        except Exception as exc:  # the serializer's own error names what it cannot hold
            why = one_line(str(exc) or type(exc).__name__)[:200]
            answer = {UNUSABLE_ANSWER: f"no store can hold it ({why})"}
    return Command(resume=answer)


def _settled(
    snapshot: StateSnapshot,
    thread_id: str,
    answer: Any,
    question: str | None,
    stored: Mapping[str, Any],
) -> bool:
    """Whether resuming would run nothing: the run ended, or it waits for an answer (and none
    is given)."""
    if not snapshot.values:
        raise UnknownThread(thread_id)
    if has_ended(snapshot) and answer is not NO_ANSWER:
        raise NotWaiting(thread_id, question, ended=True)
    if has_ended(snapshot) or (snapshot.interrupts and answer is NO_ANSWER):
        return True
    if answer is NO_ANSWER:
        _continuable(snapshot, thread_id, stored)
        return False
    # LangGraph would keep an answer for the next question the run asks, e.g. whether to
    # repeat a payment after a crash: a stale or repeated approval must not answer that.
    if not snapshot.interrupts:
        raise NotWaiting(thread_id)
    if question is not None and question not in _asked_as(snapshot.interrupts):
        raise NotWaiting(thread_id, question)
    _continuable(snapshot, thread_id, stored)
    return False


def _continuable(snapshot: StateSnapshot, thread_id: str, stored: Mapping[str, Any]) -> None:
    """Refuses a thread no answer can continue before LangGraph writes the answer (and the
    node's failure) beside its checkpoint: a refusal leaves the store as it was."""
    left = stranded(stored, snapshot.next)
    if left is not None:
        raise StrandedThread(thread_id, left)


def _asked_as(interrupts: Sequence[Interrupt]) -> set[str]:
    """The ids an answer may name: each open question's, and those it was asked under before
    an answer that was not understood (``asked_as``)."""
    ids = {i.id for i in interrupts}
    for i in interrupts:
        earlier = i.value.get("asked_as") if isinstance(i.value, dict) else None
        ids.update(str(x) for x in earlier or ())
    return ids


def _check_new(graph: Graph, snapshot: StateSnapshot | None, thread_id: str) -> None:
    if saver_of(graph) is not None and snapshot is not None and snapshot.values:
        raise ThreadExists(thread_id)


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
        _check_new(graph, graph.get_state(config) if saver_of(graph) else None, thread_id)
        output = _advance(graph, {"goal": goal}, config, on_update, context)
        return _from_output(graph, output, thread_id)


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
        if _settled(snapshot, thread_id, answer, question, stored):
            book = run_book(saver_of(graph), thread_id)
            return from_snapshot(snapshot, thread_id, book, stored)
        output = _advance(graph, _resume_input(graph, answer), config, on_update, context)
        return _from_output(graph, output, thread_id)


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
        _check_new(graph, snapshot, thread_id)
        output = await _aadvance(graph, {"goal": goal}, config, on_update, context)
        return await _afrom_output(graph, output, thread_id)


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
        if _settled(snapshot, thread_id, answer, question, stored):
            book = await arun_book(saver_of(graph), thread_id)
            return from_snapshot(snapshot, thread_id, book, stored)
        output = await _aadvance(graph, _resume_input(graph, answer), config, on_update, context)
        return await _afrom_output(graph, output, thread_id)


def read(graph: Graph, thread_id: str) -> ThreadResult:
    """The stored result of a thread, finished or not, without running anything."""
    snapshot = graph.get_state(config_for(thread_id))
    if not snapshot.values:
        raise UnknownThread(thread_id)
    book = run_book(saver_of(graph), thread_id)
    stored = stored_channels(graph, snapshot, finished=not book.records)
    return from_snapshot(snapshot, thread_id, book, stored)


def run_context(graph: Graph, thread_id: str) -> dict[str, Any] | None:
    """What the thread's latest run ran under (``RunContext``'s fields as plain JSON: the
    model's class, name and masked base URL, the protocol, the policy and its hash, where its
    prices came from, the version), as its first decision recorded it; None before a run
    opened on the thread."""
    return _context(run_book(saver_of(graph), thread_id))


async def arun_context(graph: Graph, thread_id: str) -> dict[str, Any] | None:
    """Async twin of ``run_context`` (for a graph whose checkpointer is async)."""
    return _context(await arun_book(saver_of(graph), thread_id))


def _context(book: Book) -> dict[str, Any] | None:
    opened = book.tally.opened
    return None if opened is None else dict(opened.body)
