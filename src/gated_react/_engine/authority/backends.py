"""What a ledger stores records in: the ``Backend`` protocol (sync and async twins), and
``MemoryBackend``, records in this process's memory. The table beside a SQLite or Postgres
saver's checkpoints is the other backend (``sql``)."""

from __future__ import annotations

import bisect
import contextlib
import operator
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from gated_react._engine.authority.records import Kind, Record
from gated_react.store.rows import owned


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

    def first(self, thread: str) -> int | None:
        """The sequence number of the thread's oldest record (None: it has none): a reader
        of the thread finds out whether what it read before is still there."""
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

    async def afirst(self, thread: str) -> int | None: ...

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
        self._records: dict[int, Record] = {}
        """Every record, by its sequence number."""
        self._seq = 0
        self._runs: dict[tuple[str, str], list[Record]] = {}
        self._threads: dict[str, list[Record]] = {}
        self._keys: dict[str, tuple[int, ...] | list[int]] = {}
        """The sequence numbers of the records under each key or call id: a tuple of numbers
        is no object the garbage collector tracks, where a list of records per key was one
        more at every record (a long run's collections are what it costs)."""
        self._lock = threading.Lock()

    def insert(self, records: Sequence[Record]) -> list[int]:
        with self._lock:
            return [self._add(record) for record in records]

    def claim(self, record: Record) -> int | None:
        with self._lock:
            if any(r.kind is Kind.STARTED and r.key == record.key for r in self._under(record.key)):
                return None
            return self._add(record)

    def after(self, thread: str, run: str | None, seq: int) -> list[Record]:
        with self._lock:
            found = self._runs.get((thread, run), []) if run else self._threads.get(thread, [])
            return list(found[self._from(found, seq) :])

    def about(self, keys: Sequence[str]) -> list[Record]:
        with self._lock:
            found = {r.seq: r for key in dict.fromkeys(keys) for r in self._under(key)}
        return [found[seq] for seq in sorted(found)]

    def last_run(self, thread: str) -> str | None:
        with self._lock:
            found = [rs[-1] for (t, _), rs in self._runs.items() if t == thread and rs]
        return max(found, key=lambda r: r.seq).run if found else None

    async def alast_run(self, thread: str) -> str | None:
        return self.last_run(thread)

    def first(self, thread: str) -> int | None:
        with self._lock:
            found = self._threads.get(thread)
            return found[0].seq if found else None

    async def afirst(self, thread: str) -> int | None:
        return self.first(thread)

    def forget(self, thread: str) -> int:
        """Drop a thread's records (a deleted thread)."""
        with self._lock:
            return self._drop([k for k in self._runs if k[0] == thread])

    async def aforget(self, thread: str) -> int:
        return self.forget(thread)

    def forget_owned(self, thread: str) -> int:
        """Drop the records of ``thread`` (a thread's id) and of its subgraphs."""
        with self._lock:
            parts = owned({k[0] for k in self._runs}, {thread})
            return self._drop([k for k in self._runs if k[0] in parts])

    def beside(self, saver: Any) -> MemoryBackend:
        """This backend, the records of ``saver``'s checkpoints: the saver's ``delete_thread``
        (LangGraph's, on an ``InMemorySaver`` or any saver that keeps records in memory) drops
        the thread's records after its checkpoints, as the SQL savers' does (``store/forget``).
        A saver that takes no attributes keeps its own method."""
        delete = getattr(saver, "delete_thread", None)
        adelete = getattr(saver, "adelete_thread", None)
        if delete is None or adelete is None:  # no saver LangGraph made: nothing to hook
            return self

        def delete_thread(thread_id: str) -> None:
            delete(thread_id)
            self.forget_owned(str(thread_id))

        async def adelete_thread(thread_id: str) -> None:
            await adelete(thread_id)
            self.forget_owned(str(thread_id))

        with contextlib.suppress(TypeError):
            vars(saver).update(delete_thread=delete_thread, adelete_thread=adelete_thread)
        return self

    def _drop(self, runs: list[tuple[str, str]]) -> int:
        """Drop runs' records (the lock held)."""
        dropped = {id(r) for k in runs for r in self._runs.pop(k)}
        for key, seqs in list(self._keys.items()):
            kept = [seq for seq in seqs if id(self._records[seq]) not in dropped]
            if kept:
                self._keys[key] = tuple(kept) if len(kept) <= _TUPLED else kept
            else:
                del self._keys[key]
        self._records = {s: r for s, r in self._records.items() if id(r) not in dropped}
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
        self._seq += 1
        stored = record.stored(seq=self._seq)
        self._records[stored.seq] = stored
        self._runs.setdefault((stored.thread, stored.run), []).append(stored)
        self._threads.setdefault(stored.thread, []).append(stored)
        if self._limit is not None and len(self._runs) > self._limit:
            self._drop([next(iter(self._runs))])
        self._file(stored.key, stored)
        call = stored.body.get("call")
        if isinstance(call, str) and call != stored.key:
            self._file(call, stored)
        return stored.seq

    def _file(self, key: str, record: Record) -> None:
        found = self._keys.get(key, ())
        if isinstance(found, list):
            found.append(record.seq)
        else:  # a key under many records (a model that names every run's call "call_0")
            self._keys[key] = (*found, record.seq) if len(found) < _TUPLED else [*found, record.seq]

    def _under(self, key: str) -> list[Record]:
        return [self._records[seq] for seq in self._keys.get(key, ())]

    @staticmethod
    def _from(found: list[Record], seq: int) -> int:
        """Where the records after ``seq`` start (they are stored in order)."""
        return bisect.bisect_right(found, seq, key=_SEQ)


_SEQ = operator.attrgetter("seq")
_TUPLED = 8
"""Records under one key kept as a tuple (copied at each new one), a list past that."""
