"""Where a worker's jobs write the lines of their run logs: ``runs.log`` in the folder the
operator names, or the store's table (``gated_react_run_log``).

The store takes the lines of every job of the worker in one statement per batch
(``StoreLines``): while one batch is being written, the lines of all jobs queue for the next.
One statement per job and node cost a pool connection and a round trip each, at 32 jobs
hundreds a second; batched, the statements follow the store's speed, not the jobs' count.
A job's end waits until its own lines are written (or given up), as it did when it wrote them
itself, so its job is not reported done before its run log is.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Protocol

from gated_react.errors import exception_line
from gated_react.records.run_log import STORE_INSERT, RunLog, log_line


class Writer(Protocol):
    """Where one job's run-log lines go."""

    def write(self, event: dict[str, Any]) -> None: ...

    async def aclose(self) -> None: ...


class FileWriter:
    """One job's lines into the worker's ``runs.log``."""

    def __init__(self, log: RunLog) -> None:
        self.log = log

    def write(self, event: dict[str, Any]) -> None:
        self.log.write(event)

    async def aclose(self) -> None:
        """The file stays open for the worker's next job."""


class StoreLines:
    """The worker's lines for the store, from all its jobs, written in order by one task on
    the worker's loop; a store that fails takes the lines of that batch (the runs themselves
    are in their checkpoints), never a job."""

    def __init__(self, connector: Any) -> None:
        self.connector = connector
        self._pending: list[tuple[str, str]] = []
        self._added = 0
        """Lines handed in so far, the number a job waits for at its end."""
        self._settled = 0
        """Lines written or given up so far (they settle in the order they came)."""
        self._task: asyncio.Future[None] | None = None
        self._waiters: list[asyncio.Future[None]] = []

    def add(self, thread: str, line: str) -> int:
        """Queue ``line`` of ``thread``; the mark ``settled`` waits for."""
        self._pending.append((thread, line))
        self._added += 1
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._drain())
        return self._added

    async def settled(self, mark: int) -> None:
        """Return once the lines up to ``mark`` are written or given up."""
        while self._settled < mark and self._task is not None and not self._task.done():
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await self._insert(batch)
            finally:  # written, given up, or cancelled with the worker: settled all the same
                self._settled += len(batch)
                self._wake()

    async def _insert(self, batch: list[tuple[str, str]]) -> None:
        threads, lines = [thread for thread, _ in batch], [line for _, line in batch]
        try:
            await self.connector.execute_query_async(STORE_INSERT, threads=threads, lines=lines)
        except Exception as exc:  # the run is in its checkpoints; the log is its echo
            named = ", ".join(sorted({repr(thread) for thread in threads}))
            sys.stderr.write(
                f"gated-react worker: warning: {len(lines)} run-log lines of {named} not "
                f"stored: {exception_line(exc, first_only=True)}\n"
            )

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class StoreWriter:
    """One job's lines into the worker's ``StoreLines``."""

    def __init__(self, lines: StoreLines, thread: str, secrets: tuple[str, ...]) -> None:
        self.lines, self.thread, self.secrets = lines, thread, secrets
        self._mark = 0

    def write(self, event: dict[str, Any]) -> None:
        self._mark = self.lines.add(self.thread, log_line(event, self.secrets))

    async def aclose(self) -> None:
        await self.lines.settled(self._mark)
