"""Whether a step runs on a branch of its thread: a checkpoint of the step's own, or one
just before it, has another child, so the step may have run there already.

LangGraph marks only part of what re-runs a step from an older checkpoint as time travel
(``langgraph_internals.is_time_travel``): a ``Command(resume=...)`` addressed to a checkpoint
the thread has moved past (an approval sent twice, a replay sent as a resume), and a fork made
by ``update_state`` on an old checkpoint and continued, re-run the step unmarked, and the gate
admits its calls as new. The thread's saver still holds the other branch. Its checkpoints are
listed newest first (every saver lists them so; their ids grow with time), and ours are
followed back from the one the step started from: any other checkpoint met before the last of
``DEPTH`` of ours is a branch made after it. A step with no tool that could do harm twice never
asks (``execute`` checks only before a call that is not idempotent), so this costs one listing
of a few checkpoints there and nothing elsewhere.
"""

from __future__ import annotations

from contextlib import aclosing, closing
from typing import Any

from langchain_core.runnables import RunnableConfig

from gated_react._engine.langgraph_internals import saved_at

DEPTH = 4
"""Checkpoints of the step's chain looked at: the one before ``execute``, the gate's input, the
one before ``validate``, and one more for an edit or a fork between them."""


class _Walk:
    """Our chain, followed back through the listing."""

    def __init__(self, current: str) -> None:
        self.expected, self.left = current, DEPTH

    def seen(self, checkpoint: Any) -> bool | None:
        """True: a branch (a checkpoint not ours, newer than one of ours); False: none within
        ``DEPTH``; None: go on listing."""
        found = checkpoint.config["configurable"]["checkpoint_id"]
        if found != self.expected:
            if found > self.expected:  # ids grow with time: made after ours, on another branch
                return True
            if self.left < DEPTH:  # one of ours missing from the listing: no proof either way
                return False
            # the step's own checkpoint is not stored yet (a run with async durability): the
            # newest stored one is the one it follows
        parent = (checkpoint.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        self.left -= 1
        if parent is None or self.left == 0:
            return False
        self.expected = parent
        return None


def on_a_branch(config: RunnableConfig) -> bool:
    """Sync twin: whether the step runs on a branch of its thread (``_Walk``)."""
    found = saved_at(config)
    if found is None:
        return False
    saver, thread, current = found
    walk = _Walk(current)
    with closing(saver.list(thread)) as listed:  # left early: the saver's cursor closes now
        for checkpoint in listed:
            verdict = walk.seen(checkpoint)
            if verdict is not None:
                return verdict
    return False


async def aon_a_branch(config: RunnableConfig) -> bool:
    """Async twin of ``on_a_branch``."""
    found = saved_at(config)
    if found is None:
        return False
    saver, thread, current = found
    walk = _Walk(current)
    async with aclosing(saver.alist(thread)) as listed:
        async for checkpoint in listed:
            verdict = walk.seen(checkpoint)
            if verdict is not None:
                return verdict
    return False
