"""Whether a step's calls may have run on another branch of its thread: a replay or a fork of
a checkpoint the thread has moved past, which LangGraph marks only in part.

Time travel (a run addressed to an old ``checkpoint_id``) is marked by LangGraph; a
``Command(resume=...)`` sent to a checkpoint the thread has moved past (an approval sent twice,
a replay sent as a resume), a fork written by ``update_state`` on an old checkpoint and
continued with ``invoke(None)``, and any number of edits in a row are not, and the gate admits
the old step's calls as new. The thread's saver still holds the other branch. Before a call
that is not idempotent runs, its checkpoints are listed newest first (every saver lists them
so; their ids grow with time) and the step's own are followed back to the checkpoint before
the step began (its decision's, or the run's input). A checkpoint met on the way that is not
the step's own is on another branch made since; if the writes made there let one of the
step's calls through a gate (it may have run) or completed it, so may this one have; there a
call is known by its id or by its key, as a fork before the decision proposes it again under a
new id. Under LangGraph's time travel the branch alone is enough: a step re-run from before its decision
proposes again, and a payment proposed again is the one the other branch made. When the
step's own checkpoint is not stored yet (``durability="async"`` or ``"exit"``), its chain
cannot be followed, and a write that completed one of its calls decides. Listing stops after
``CAP`` checkpoints: another branch seen but not all of it counts as proof it may have run.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import aclosing, closing
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from gated_react._engine.langgraph_internals import is_time_travel, saved_at
from gated_react.state import Call

CAP = 48
"""Checkpoints listed at most: a step's five, and edits, forks and replays beside them."""
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
class Named:
    """A step's calls as the check names them."""

    ids: frozenset[str]
    """Their tool call ids (their keys, for calls recorded without one)."""
    keys: frozenset[str]
    """Their idempotency keys (thread, step, tool, arguments): the same call, proposed again
    under a new id on a branch forked before its decision, has the same key. Only another
    branch made since the step began is searched by key: a later run of the thread numbers
    its steps from 1 again, and its calls may have the keys of an earlier run's."""

    @classmethod
    def of(cls, calls: Iterable[Call]) -> Named:
        found = list(calls)
        return cls(frozenset(c.id or c.key for c in found), frozenset(c.key for c in found))


def _recorded(checkpoint: Any, ids: frozenset[str], *, admitted: bool) -> bool:
    """Whether the writes made against ``checkpoint`` record one of the calls ``ids`` (their
    tool call ids, else their keys, as ``execute`` names them; or their keys, ``Named``) as
    completed (a result, a history entry), or with ``admitted`` as let through by a gate at all
    (in the writes or the calls the checkpoint holds: it may have run, as a process can die
    while it runs)."""
    stored = checkpoint.checkpoint.get("channel_values") or {}
    held = [("", "calls", stored["calls"])] if admitted and "calls" in stored else []
    for _, channel, value in [*held, *(checkpoint.pending_writes or ())]:
        entries = [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []
        if channel == "calls" and any(
            (e.get("id") in ids or e.get("key") in ids) and (admitted or e.get("outcome"))
            for e in entries
        ):
            return True
        if channel == "history" and any((e.get("action") or {}).get("id") in ids for e in entries):
            return True
    return False


class _Walk:
    """The step's chain, followed back through the listing."""

    def __init__(self, current: str, calls: Named, travel: bool = False) -> None:
        self.current, self.ids, self.travel = current, calls.ids, travel
        self.anywhere = calls.ids | calls.keys  # on another branch made since the step began
        self.expected: str | None = current
        self.boundary: str | None = None
        self.lost = self.other = False
        self.count = 0

    def seen(self, checkpoint: Any) -> bool | None:
        """True: the calls may have run on another branch; False: they did not; None: go on
        listing."""
        self.count += 1
        if self.count > CAP:  # another branch seen, and not all of it: no proof they did not
            return self.other
        if self.lost:  # the chain cannot be followed: what the writes record decides
            return True if _recorded(checkpoint, self.ids, admitted=False) else None
        found = _id(checkpoint)
        if found == self.expected:
            return self._followed(checkpoint)
        if self.expected is not None and found > self.expected:
            return self._elsewhere(checkpoint)
        if self.expected == self.current:  # not stored yet (async or exit durability)
            self.lost = True
            return True if _recorded(checkpoint, self.ids, admitted=False) else None
        return self.other  # a checkpoint of the chain is missing: no proof either way

    def _elsewhere(self, checkpoint: Any) -> bool | None:
        """A checkpoint made after one of the step's own and not one of them: another branch,
        where a gate may have let the calls through."""
        self.other = True
        if self.travel:  # LangGraph's time travel: the step re-runs, whatever it decides
            return True
        return True if _recorded(checkpoint, self.anywhere, admitted=True) else None

    def _followed(self, checkpoint: Any) -> bool | None:
        if self.expected == self.boundary:
            return False  # back before the step began: every branch since was seen
        parent = _parent(checkpoint)
        if parent is None:
            return False
        if self.boundary is None and _starts_a_step(checkpoint):
            self.boundary = parent
        self.expected = parent
        return None


def on_a_branch(config: RunnableConfig, calls: Named) -> bool:
    """Sync twin: whether the step's calls may have run on another branch."""
    found = saved_at(config)
    if found is None:
        return False
    saver, thread, current = found
    walk = _Walk(current, calls, is_time_travel(config))
    with closing(saver.list(thread)) as listed:  # left early: the saver's cursor closes now
        for checkpoint in listed:
            verdict = walk.seen(checkpoint)
            if verdict is not None:
                return verdict
    return False


async def aon_a_branch(config: RunnableConfig, calls: Named) -> bool:
    """Async twin of ``on_a_branch``."""
    found = saved_at(config)
    if found is None:
        return False
    saver, thread, current = found
    walk = _Walk(current, calls, is_time_travel(config))
    async with aclosing(saver.alist(thread)) as listed:
        async for checkpoint in listed:
            verdict = walk.seen(checkpoint)
            if verdict is not None:
                return verdict
    return False
