"""What a ledger stores records in: the ``Backend`` protocol (sync and async twins), and
``MemoryBackend``, records in this process's memory. The table beside a SQLite or Postgres
saver's checkpoints is the other backend (``sql``)."""

from __future__ import annotations

import bisect
import operator
import threading
from collections.abc import Sequence
from typing import Protocol

from gated_react._engine.authority.records import Kind, Record


class Backend(Protocol):
    """Storage for records; sync and async twins (a backend may support only the mode of the
    saver it stores beside, and raises ``RuntimeError`` for the other)."""

    def insert(self, records: Sequence[Record]) -> list[int]:
        """Store ``records`` (signed), in order; their sequence numbers."""
        ...

    def claim(self, record: Record) -> int | None:
        """Store a ``started`` record unless one with its key is stored: its sequence number,
        or None when another was stored first (atomic: two processes never both claim)."""
        ...

    def after(self, thread: str, run: str | None, seq: int) -> list[Record]:
        """The run's records stored after ``seq``, in order; with ``run`` None, every run's
        of the thread (what a limit across the thread's runs is checked against)."""
        ...

    def last_run(self, thread: str) -> str | None:
        """The run of the thread's newest record (what a reader of the thread shows)."""
        ...

    def forget(self, thread: str) -> int:
        """Delete the thread's records (a thread deleted everywhere it is written)."""
        ...

    def about(self, keys: Sequence[str]) -> list[Record]:
        """Every record whose key, or whose call id (``body["call"]``), is one of ``keys``, in
        any thread, in order (a copied thread keeps its calls' ids)."""
        ...

    async def ainsert(self, records: Sequence[Record]) -> list[int]: ...

    async def aclaim(self, record: Record) -> int | None: ...

    async def aafter(self, thread: str, run: str | None, seq: int) -> list[Record]: ...

    async def aabout(self, keys: Sequence[str]) -> list[Record]: ...

    async def alast_run(self, thread: str) -> str | None: ...

    async def aforget(self, thread: str) -> int: ...


class MemoryBackend:
    """Records in this process's memory (savers that keep checkpoints in memory, graphs
    without a checkpointer): as durable as the checkpoints they sit beside. Nothing outside
    the process can write them, so they are not signed: a record is as ``verified`` as it was
    given (the ledger's own are)."""

    in_process = True

    def __init__(self, runs: int | None = None) -> None:
        self._limit = runs
        """Runs kept at most (the oldest go first); None: all, as long as the saver lives."""
        self._records: list[Record] = []
        self._runs: dict[tuple[str, str], list[Record]] = {}
        self._threads: dict[str, list[Record]] = {}
        self._keys: dict[str, list[Record]] = {}
        self._lock = threading.Lock()

    def insert(self, records: Sequence[Record]) -> list[int]:
        with self._lock:
            return [self._add(record) for record in records]

    def claim(self, record: Record) -> int | None:
        with self._lock:
            held = self._keys.get(record.key, ())
            if any(r.kind is Kind.STARTED and r.key == record.key for r in held):
                return None
            return self._add(record)

    def after(self, thread: str, run: str | None, seq: int) -> list[Record]:
        with self._lock:
            found = self._runs.get((thread, run), []) if run else self._threads.get(thread, [])
            return list(found[self._from(found, seq) :])

    def about(self, keys: Sequence[str]) -> list[Record]:
        with self._lock:
            found = {r.seq: r for key in dict.fromkeys(keys) for r in self._keys.get(key, ())}
        return [found[seq] for seq in sorted(found)]

    def last_run(self, thread: str) -> str | None:
        with self._lock:
            found = [rs[-1] for (t, _), rs in self._runs.items() if t == thread and rs]
        return max(found, key=lambda r: r.seq).run if found else None

    async def alast_run(self, thread: str) -> str | None:
        return self.last_run(thread)

    def forget(self, thread: str) -> int:
        """Drop a thread's records (a deleted thread)."""
        with self._lock:
            return self._drop([k for k in self._runs if k[0] == thread])

    async def aforget(self, thread: str) -> int:
        return self.forget(thread)

    def _drop(self, runs: list[tuple[str, str]]) -> int:
        """Drop runs' records (the lock held)."""
        dropped = {id(r) for k in runs for r in self._runs.pop(k)}
        for key, found in list(self._keys.items()):
            kept = [r for r in found if id(r) not in dropped]
            if kept:
                self._keys[key] = kept
            else:
                del self._keys[key]
        self._records = [r for r in self._records if id(r) not in dropped]
        for thread in {k[0] for k in runs}:
            kept_runs = [r for r in self._threads.pop(thread, ()) if id(r) not in dropped]
            if kept_runs:
                self._threads[thread] = kept_runs
        return len(dropped)

    async def ainsert(self, records: Sequence[Record]) -> list[int]:
        return self.insert(records)

    async def aclaim(self, record: Record) -> int | None:
        return self.claim(record)

    async def aafter(self, thread: str, run: str | None, seq: int) -> list[Record]:
        return self.after(thread, run, seq)

    async def aabout(self, keys: Sequence[str]) -> list[Record]:
        return self.about(keys)

    def _add(self, record: Record) -> int:
        stored = record.stored(seq=(self._records[-1].seq if self._records else 0) + 1)
        self._records.append(stored)
        self._runs.setdefault((stored.thread, stored.run), []).append(stored)
        self._threads.setdefault(stored.thread, []).append(stored)
        if self._limit is not None and len(self._runs) > self._limit:
            self._drop([next(iter(self._runs))])
        self._keys.setdefault(stored.key, []).append(stored)
        call = stored.body.get("call")
        if isinstance(call, str) and call != stored.key:
            self._keys.setdefault(call, []).append(stored)
        return stored.seq

    @staticmethod
    def _from(found: list[Record], seq: int) -> int:
        """Where the records after ``seq`` start (they are stored in order)."""
        return bisect.bisect_right(found, seq, key=_SEQ)


_SEQ = operator.attrgetter("seq")
