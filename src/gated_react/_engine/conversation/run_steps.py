"""A run's steps as its conversation holds them, read on from where the last reading stopped.

A run's conversation only grows between its decisions, and LangGraph hands each node the same
message objects: what was read of it (its steps, call ids, loop keys, decisions, and the parts of
its requests built so far) is kept with the run's question message and read on from there, so a
step costs the same at any length of run. Nothing is kept past the conversation it was read from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar, cast

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from gated_react._engine.conversation.chat import ran
from gated_react._engine.conversation.held import Held
from gated_react._engine.execution.call_keys import LoopIndex, loop_key
from gated_react._engine.execution.tool_results import is_blocks
from gated_react.state import HistoryEntry, ToolAction

T = TypeVar("T")

_BUILT_KEPT = 64
"""Parts kept per run: its shown steps, its earlier turns, its latest fold's summary."""


def run_loop_index(messages: Sequence[BaseMessage], at: int) -> LoopIndex:
    """The loop keys of the run's calls on this branch (``run_steps``'), each made once, as an
    index to check calls against (counted as they are read)."""
    found = read_run(messages, at)
    for step in found.steps[found.keyed :]:
        keys = [loop_key(e.action.name, e.action.args) for e in step]
        found.loops.extend(keys)
        found.counts.update(keys)
    found.keyed = len(found.steps)
    return LoopIndex(found.loops, found.counts)


def run_call_ids(messages: Sequence[BaseMessage], at: int) -> AbstractSet[str]:
    """The ids of every call the run has made on this branch (answered or not); read only."""
    return read_run(messages, at).ids


def run_decisions(messages: Sequence[BaseMessage], at: int) -> int:
    """How many of the run's decisions on this branch made calls (its AI messages with some)."""
    return read_run(messages, at).decisions


def run_steps(messages: Sequence[BaseMessage], at: int) -> list[list[HistoryEntry]]:
    """The run's steps on this branch of the conversation, oldest first: each AI message
    after the run's question with its answered calls, as the model saw them (a result's blocks
    as blocks, an edited call as the model made it with the note its result carries). Read
    incrementally: a run's conversation only grows between its decisions."""
    return read_run(messages, at).steps


def read_run(messages: Sequence[BaseMessage], at: int) -> RunSteps:
    """The run's steps, read on from where the last reading of this conversation stopped.
    Kept with the run's question (a weak reference): they go when the conversation does."""
    question = messages[at]
    kept = _RUNS.get(id(question), question)
    found = kept[1] if kept is not None else None
    if (
        found is None
        or found.at != at
        or found.seen > len(messages)
        or (found.seen and messages[found.seen - 1] is not found.last)
    ):
        found = RunSteps(at)
        _RUNS.put(id(question), question, found)
    found.read(messages, at)
    return found


class RunSteps:
    """A run's steps as read so far, where the reading stopped, and the parts of its requests
    built so far (``built``)."""

    def __init__(self, at: int) -> None:
        self.at = at
        self._built: dict[Hashable, tuple[Any, Any]] = {}
        self.steps: list[list[HistoryEntry]] = []
        self.loops: list[str] = []
        """The loop keys of the steps' calls, as far as they were asked for."""
        self.counts: Counter[str] = Counter()
        """How many times each of ``loops`` occurs."""
        self.keyed = 0
        """How many steps ``loops`` holds the keys of."""
        self.decisions = 0
        self.seen = 0
        self.last: BaseMessage | None = None
        self.open: list[tuple[int, dict[str, Any]]] = []
        """The calls of the last AI message read, not answered yet."""
        self.results: dict[str, ToolMessage] = {}
        self.ids: set[str] = set()

    def read(self, messages: Sequence[BaseMessage], at: int) -> None:
        start = max(self.seen, at + 1)
        for message in messages[start:]:
            if isinstance(message, AIMessage) and message.tool_calls:
                self._close()
                self.decisions += 1
                self.open = [(len(self.steps) + 1, dict(call)) for call in message.tool_calls]
                self.ids.update(str(call.get("id")) for call in message.tool_calls)
            elif isinstance(message, ToolMessage) and ran(message):
                self.results.setdefault(message.tool_call_id, message)
        self._close(partial=True)
        self.seen, self.last = len(messages), messages[-1] if messages else None

    def _close(self, partial: bool = False) -> None:
        """The open AI message's calls, if all are answered (or, at the end, those that are)."""
        if not self.open:
            return
        answered = [(n, c) for n, c in self.open if c.get("id") in self.results]
        if len(answered) < len(self.open) and partial:
            return
        if answered:
            self.steps.append([_entry(n, c, self.results[str(c.get("id"))]) for n, c in answered])
        self.open = []

    def built(self, key: Hashable, build: Callable[[], T], keep: Any = None) -> T:
        """What ``build()`` makes, once while kept: parts of a request the run's next
        decisions send again unchanged (its earlier turns, its steps). What they are built of
        is kept alive with them, so an id in a key is never another object's."""
        found = self._built.get(key)
        if found is not None:
            return cast(T, found[0])
        made = build()
        if len(self._built) >= _BUILT_KEPT:
            self._built.pop(next(iter(self._built)))
        self._built[key] = (made, keep)
        return made


_RUNS: Held[int, RunSteps] = Held()
"""The runs read, held with their question message."""


def _entry(step: int, call: dict[str, Any], result: ToolMessage) -> HistoryEntry:
    action = ToolAction(name=str(call.get("name")), args=call.get("args") or {}, id=call.get("id"))
    return HistoryEntry(step=step, action=action, observation=shown_result(result),
                        ok=result.status != "error", message_id=result.id)  # fmt: skip


def shown_result(message: ToolMessage) -> Any:
    """A stored result as the model was shown it: its blocks, or its text (a plain ``str``:
    LangChain's ``TextAccessor`` is an object more for the garbage collector, kept a step)."""
    return message.content if is_blocks(message.content) else str.__str__(message.text)
