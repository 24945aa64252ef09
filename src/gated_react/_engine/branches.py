"""Whether a step's calls may have run on another branch of its thread: a replay or a fork of
a checkpoint the thread has moved past, which LangGraph marks only in part.

Time travel (a run addressed to an old ``checkpoint_id``) is marked by LangGraph; a
``Command(resume=...)`` sent to a checkpoint the thread has moved past (an approval sent twice,
a replay sent as a resume), a fork written by ``update_state`` on an old checkpoint and
continued with ``invoke(None)``, and any number of edits in a row are not, and the gate admits
the old step's calls as new. The thread's saver still holds the other branch. Before a call
that is not idempotent runs, its checkpoints are listed newest first (every saver lists them
so; their ids grow with time) and the run's own are followed back to its input, the checkpoint
where it began. A checkpoint met on the way that is not the run's own is on another branch
made since; if the writes made there let one of the step's calls through a gate (it may have
run) or completed it, so may this one have. A call is known by its tool call id or by its
idempotency key (its run's, step's, tool's and arguments'): forked before its decision, the
model proposes it again under a new id, with the same key. Under LangGraph's time travel a
branch made since the step began is enough: a step re-run from before its decision proposes
again, and a payment proposed again is the one the other branch made. When the step's own
checkpoint is not stored yet (``durability="async"`` or ``"exit"``), its chain cannot be
followed, and a write that completed one of its calls decides. Listing stops after ``CAP``
checkpoints: another branch seen but not all of it counts as proof it may have run.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Set
from contextlib import aclosing, closing
from dataclasses import dataclass
from functools import cache, partial
from typing import Any
from weakref import WeakKeyDictionary

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from gated_react._engine.call_keys import args_hash
from gated_react._engine.langgraph_internals import (
    channels_now,
    is_time_travel,
    replayed_from,
    saved_at,
)
from gated_react.state import Call

CAP = 48
"""Checkpoints listed at most: the run's own since the last check (a step's five), and
edits, forks and replays beside them; about nine steps of a run never checked before."""
_STEP_STARTS = "branch:to:decide"
"""The channel a checkpoint updates when a decision (a new step) comes next."""


def _id(checkpoint: Any) -> str:
    return str(checkpoint.config["configurable"]["checkpoint_id"])


def _parent(checkpoint: Any) -> str | None:
    found = (checkpoint.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return None if found is None else str(found)


def _starts_a_step(checkpoint: Any) -> bool:
    updated = checkpoint.checkpoint.get("updated_channels") or ()
    return _STEP_STARTS in updated or checkpoint.metadata.get("source") == "input"


@dataclass(frozen=True, slots=True)
class Unsafe:
    """A step's calls that could do harm twice, as the check knows them."""

    ids: frozenset[str]
    """Their tool call ids (their keys, for calls recorded without one)."""
    same: frozenset[str]
    """``tool:arguments hash`` of each: forked before its decision, a run proposes the same
    call again under a new id (and, when an earlier step is run again, at another step). A
    run never runs one call twice on one branch (loop detection), so the same call let
    through on another branch of the same run is this one; empty with loop detection off."""
    run: int
    """Which run of the thread they belong to (``State.spend_from``, which a run's forks and
    the end of its waiting step keep): a later run asking for the same again is a new request."""
    turn: str | None
    """The question their run answers (``State.turn``): a run opened again on the same
    question (its end written, then ``decide``) is no new request."""

    @classmethod
    def of(
        cls, calls: Iterable[Call], run: int, turn: str | None, *, by_arguments: bool = True
    ) -> Unsafe:
        found = list(calls)
        same = frozenset(_same(c.tool, c.args) for c in found) if by_arguments else frozenset()
        return cls(frozenset(c.id or c.key for c in found), same, run, turn)


def _same(tool: Any, args: Any) -> str:
    return f"{tool}:{args_hash(args if isinstance(args, dict) else None)}"


def _same_run(stored: dict[str, Any], calls: Unsafe, asked: Callable[[], Set[str]] | None) -> bool:
    """Whether a checkpoint's values are of the calls' run or question. Found in the record
    alone (``asked``: the questions this run's conversation holds), a run that began where this
    one did is the same only if this conversation holds its question: a chat UI's edit or
    regenerate began there too, on a new message."""
    turn = stored.get("turn")
    if calls.turn is not None and turn == calls.turn:
        return True
    if stored.get("spend_from", 0) != calls.run:
        return False
    return asked is None or turn is None or turn in asked()


def _recorded(
    checkpoint: Any,
    calls: Unsafe,
    *,
    admitted: bool,
    asked: Callable[[], Set[str]] | None = None,
) -> bool:
    """Whether the writes made against ``checkpoint`` record one of ``calls`` (by id; by tool
    and arguments in the same run, or for the same question) as completed (a result, a
    history entry), or with ``admitted`` as let through by a gate at all (in the writes or the
    calls the checkpoint holds: it may have run, as a process can die while it runs)."""
    stored = checkpoint.checkpoint.get("channel_values") or {}
    same_run = _same_run(stored, calls, asked)

    def named(e: dict[str, Any]) -> bool:
        return (e.get("id") or e.get("key")) in calls.ids or (
            same_run and _same(e.get("tool"), e.get("args")) in calls.same
        )

    held = [("", "calls", stored["calls"])] if admitted and "calls" in stored else []
    for _, channel, value in [*held, *(checkpoint.pending_writes or ())]:
        entries = [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []
        if channel == "calls" and any(named(e) and (admitted or e.get("outcome")) for e in entries):
            return True
        if channel == "history" and any(
            (e.get("action") or {}).get("id") in calls.ids for e in entries
        ):
            return True
    return False


class _Walk:
    """The step's chain, followed back through the listing to where its run began."""

    def __init__(
        self,
        current: str,
        calls: Unsafe,
        *,
        travel: bool = False,
        known: str | None = None,
        asked: Callable[[], Set[str]] = frozenset,
        replayed: str | None = None,
    ) -> None:
        self.current, self.calls, self.travel = current, calls, travel
        self.asked = cache(asked)  # the run's questions, read once and only if needed
        self.replayed = replayed  # the checkpoint a time-travelling invocation replays from
        self.known = known  # a checkpoint of the run already seen linear back to its input
        self.linear = False  # ended at the run's input, with no other branch seen
        self.expected: str | None = current
        self.boundary: str | None = None  # the checkpoint before the step began
        self.in_step = True
        self.lost = self.other = False
        self.count = 0

    def seen(self, checkpoint: Any) -> bool | None:
        """True: the calls may have run on another branch; False: they did not; None: go on
        listing."""
        self.count += 1
        if self.count > CAP:  # another branch seen, and not all of it: no proof they did not
            return self.other
        if self.lost:  # the chain cannot be followed: what the writes record decides
            return self._in_record(checkpoint)
        found = _id(checkpoint)
        if found == self.expected:
            return self._followed(checkpoint)
        if self.expected is not None and found > self.expected:
            return self._elsewhere(checkpoint)
        if self.expected == self.current:  # not stored yet (async or exit durability)
            self.lost = True
            return self._in_record(checkpoint)
        return self.other  # a checkpoint of the chain is missing: no proof either way

    def _in_record(self, checkpoint: Any) -> bool | None:
        """Found in the record alone: a completed call of this run's, or, replaying (time
        travel), one made since the checkpoint replayed. A new input sent with a checkpoint id
        (a chat UI's regenerate) replays from its own input, newer than the branch it
        replaces; a replay of an old input re-asks that input's question under a new id."""
        if self.replayed is not None and _id(checkpoint) <= self.replayed:
            return None  # before the point this invocation replays from
        asked = None if self.replayed is not None else self.asked
        return True if _recorded(checkpoint, self.calls, admitted=False, asked=asked) else None

    def _elsewhere(self, checkpoint: Any) -> bool | None:
        """A checkpoint made after one of the run's own and not one of them: another branch,
        where a gate may have let the calls through."""
        self.other = True
        if self.travel and self.in_step:  # LangGraph's time travel: the step re-runs
            return True
        return True if _recorded(checkpoint, self.calls, admitted=True) else None

    def _followed(self, checkpoint: Any) -> bool | None:
        found, parent = _id(checkpoint), _parent(checkpoint)
        start = checkpoint.metadata.get("source") == "input" or parent is None
        if start or (found == self.known and not self.other):
            self.linear = not self.other  # nothing older than this can be a newer branch
            return False  # where the run began: every branch made since was seen
        if found == self.boundary:
            self.in_step = False  # earlier steps: only the same call's record counts
        if self.boundary is None and _starts_a_step(checkpoint):
            self.boundary = parent
        self.expected = parent
        return None


def _questions(config: RunnableConfig) -> frozenset[str]:
    """The ids of the human messages in the run's conversation, as its step began."""
    messages = channels_now(config, ["messages"]).get("messages") or []
    return frozenset(m.id for m in messages if isinstance(m, HumanMessage) and m.id)


class _Linear:
    """Per saver and thread, the newest checkpoint seen with no other branch between it and
    its run's input. Ids grow with time, so a branch made later is newer than it: the next
    step's walk stops there, and a step costs its own few checkpoints, not the run's."""

    def __init__(self) -> None:
        self.by_saver: WeakKeyDictionary[Any, OrderedDict[tuple[str, str], str]]
        self.by_saver = WeakKeyDictionary()

    def get(self, saver: Any, thread: RunnableConfig) -> str | None:
        try:
            return self.by_saver.get(saver, OrderedDict()).get(_thread(thread))
        except TypeError:  # a saver that cannot be weakly referenced: no memory
            return None

    def remember(self, saver: Any, thread: RunnableConfig, current: str) -> None:
        try:
            threads = self.by_saver.setdefault(saver, OrderedDict())
        except TypeError:
            return
        threads[_thread(thread)] = current
        threads.move_to_end(_thread(thread))
        while len(threads) > LINEAR_THREADS:
            threads.popitem(last=False)


LINEAR_THREADS = 1024
"""Threads remembered per saver (the least recently checked forgotten first)."""
_LINEAR = _Linear()


def _thread(thread: RunnableConfig) -> tuple[str, str]:
    conf = thread.get("configurable", {})
    return str(conf.get("thread_id")), str(conf.get("checkpoint_ns", ""))


def _ended(walk: _Walk, saver: Any, thread: RunnableConfig, verdict: bool) -> bool:
    if walk.linear:
        _LINEAR.remember(saver, thread, walk.current)
    return verdict


def _start(config: RunnableConfig, calls: Unsafe) -> tuple[Any, RunnableConfig, _Walk] | None:
    """The saver, the thread's listing config and the walk; None without a checkpointer."""
    found = saved_at(config)
    if found is None:
        return None
    saver, thread, current = found
    asked = partial(_questions, config)
    known, replayed = _LINEAR.get(saver, thread), replayed_from(config)
    travel = is_time_travel(config)
    walk = _Walk(current, calls, travel=travel, known=known, asked=asked, replayed=replayed)
    return saver, thread, walk


def on_a_branch(config: RunnableConfig, calls: Unsafe) -> bool:
    """Sync twin: whether the step's calls may have run on another branch."""
    if (started := _start(config, calls)) is None:
        return False
    saver, thread, walk = started
    with closing(saver.list(thread)) as listed:  # left early: the saver's cursor closes now
        for checkpoint in listed:
            if (verdict := walk.seen(checkpoint)) is not None:
                return _ended(walk, saver, thread, verdict)
    return False


async def aon_a_branch(config: RunnableConfig, calls: Unsafe) -> bool:
    """Async twin of ``on_a_branch``."""
    if (started := _start(config, calls)) is None:
        return False
    saver, thread, walk = started
    async with aclosing(saver.alist(thread)) as listed:
        async for checkpoint in listed:
            if (verdict := walk.seen(checkpoint)) is not None:
                return _ended(walk, saver, thread, verdict)
    return False
