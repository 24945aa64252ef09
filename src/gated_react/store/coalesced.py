"""A worker's Postgres saver that commits the checkpoints of the supersteps that run no tool
together, in one transaction and one round trip, instead of a transaction for each checkpoint
and each task's writes.

A step is five supersteps (decide, validate, gate, execute, observe), each storing a
checkpoint and its task's writes: ten commits. Here a checkpoint whose next nodes are all
quiet (``QUIET_NODES``: they run no tool) is held in memory, with the writes made against it,
and everything held is committed, in the order LangGraph stored it, with the next checkpoint
that leads elsewhere: the one that leads to ``execute`` (so a call is on disk before it runs),
to ``finish``, to ``stop`` or to the end of the run. The writes against such a checkpoint (a
tool's results, the answer) are committed as soon as they are made, and so is a write that
records an error, an interrupt or an answer, and everything held before any read and before
the run's thread lock is released (``store/locks.py`` calls ``aflush``: never after another
worker may have taken the thread). A step then costs two commits. A run that raises drops what
it held, as a killed worker does.

A process killed while something is held loses only work that runs no tool, done again on
resume: observe's record (its input, the tool's result, is in execute's committed writes), the
checks of validate and gate (asked again), and a model reply, as a reply in flight is lost
now. What is on disk is always a prefix of the chain LangGraph wrote, so every stored
checkpoint's parent, and the writes its delta channels are rebuilt from, are there too.

The statements are the Postgres saver's own: its writes go through ``_cursor(pipeline=True)``,
which records them here instead of running them (pinned in ``tests/store/test_coalesced.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT, RESUME

QUIET_NODES = ("decide", "validate", "gate", "observe")
"""The nodes that run no tool: a checkpoint that leads only to them is held, not committed."""
_QUIET = frozenset(f"branch:to:{node}" for node in QUIET_NODES)
_BRANCH = "branch:to:"
_RECORDS = (ERROR, INTERRUPT, RESUME)  # a write of these is committed at once


def held(checkpoint: Checkpoint) -> bool:
    """The checkpoint leads to quiet nodes only, and to at least one: the nodes it leads to
    are the branch channels holding a value (a branch just taken is emptied)."""
    branches = {channel for channel in checkpoint["channel_values"] if channel.startswith(_BRANCH)}
    return bool(branches) and branches <= _QUIET


class _Recorder:
    """A cursor that keeps the statements it is given, to run them later in one batch."""

    def __init__(self, into: list[tuple[str, Any, bool]]) -> None:
        self._into = into

    async def execute(self, query: str, params: Any = None) -> None:
        self._into.append((query, params, False))

    async def executemany(self, query: str, params_seq: Any) -> None:
        self._into.append((query, list(params_seq), True))


class CoalescedPostgresSaver(AsyncPostgresSaver):
    """``AsyncPostgresSaver`` on one connection, holding back the checkpoints that lead to
    quiet nodes and committing them with the next one that does not."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: list[tuple[str, Any, bool]] = []
        self._holding = False  # the last checkpoint stored is held
        self._order = asyncio.Lock()  # statements recorded in the order the calls came
        self.commits = 0  # transactions committed (for the benchmark)

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[Any]:
        if pipeline:  # the saver's writes: recorded, run at the next flush
            yield _Recorder(self._pending)
            return
        await self.aflush()  # a read sees everything written before it
        async with super()._cursor() as cur:
            yield cur

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        async with self._order:
            stored = await super().aput(config, checkpoint, metadata, new_versions)
            self._holding = held(checkpoint)
            if not self._holding:
                await self.aflush()
            return stored

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        async with self._order:
            await super().aput_writes(config, writes, task_id, task_path)
            if not self._holding or any(channel in _RECORDS for channel, _ in writes):
                await self.aflush()

    async def adelete_thread(self, thread_id: str) -> None:
        async with self._order:
            await super().adelete_thread(thread_id)
            await self.aflush()

    async def aflush(self) -> None:
        """Commit everything held, in one transaction; on failure nothing of it is kept, and
        what is on disk is the chain up to the last commit."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        async with super()._cursor(pipeline=True) as cur, cur.connection.transaction():
            for query, params, many in pending:
                if many:
                    await cur.executemany(query, params)
                else:
                    await cur.execute(query, params)
        self.commits += 1
