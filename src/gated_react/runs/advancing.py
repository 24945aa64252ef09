"""How a run advances: invoked, or streamed node by node to a watcher; and whether a resume
may run at all (the thread exists, waits for the answer given, can be continued)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, Interrupt, StateSnapshot

from gated_react._engine.conversation.steps import stranded
from gated_react.answers import UNUSABLE_ANSWER
from gated_react.errors import GatedReactError, StrandedThread, one_line
from gated_react.runs.reading import Graph, has_ended, saver_of
from gated_react.state import CHANNELS

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


def advance(
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


async def aadvance(
    graph: Graph,
    value: Any,
    config: RunnableConfig,
    on_update: OnUpdate | None,
    context: Any = None,
) -> dict[str, Any]:
    """Async ``advance``."""
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


def resume_input(graph: Graph, answer: Any) -> Command[Any] | None:
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


def settled(
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


def check_new(graph: Graph, snapshot: StateSnapshot | None, thread_id: str) -> None:
    if saver_of(graph) is not None and snapshot is not None and snapshot.values:
        raise ThreadExists(thread_id)
