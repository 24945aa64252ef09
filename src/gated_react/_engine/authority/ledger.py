"""Where records are stored and read: a ``Ledger`` is a backend (a table beside the checkpoints
in the run's own database, or this process's memory) and the key that signs and checks.

``ledger_of(config)`` finds the ledger of the checkpointer a node runs under: SQLite and
Postgres savers (LangGraph's own or this package's) keep records in a table of their database
(``sql``), any other saver in memory beside it, a graph without one for the length of a run.
No LangGraph API writes these records: ``update_state``, a ``Command``, a fork, Studio's edits
and the server's REST endpoints change the state, never what was permitted or paid.

A run's records are read once and then incrementally (``Book``: only what was stored since),
so a check costs the same at step 300 as at step 3.
"""

from __future__ import annotations

import bisect
import operator
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from weakref import WeakKeyDictionary

from langchain_core.runnables import RunnableConfig

from gated_react._engine.authority.records import Kind, Record, process_key
from gated_react._engine.authority.spend import Tally
from gated_react._engine.langgraph_internals import run_key, saver_of
from gated_react.state import Usage
from gated_react.store.key import StoreKey


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

    def after(self, thread: str, run: str, seq: int) -> list[Record]:
        """The run's records stored after ``seq``, in order."""
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

    async def aafter(self, thread: str, run: str, seq: int) -> list[Record]: ...

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

    def after(self, thread: str, run: str, seq: int) -> list[Record]:
        with self._lock:
            found = self._runs.get((thread, run), [])
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
        return len(dropped)

    async def ainsert(self, records: Sequence[Record]) -> list[int]:
        return self.insert(records)

    async def aclaim(self, record: Record) -> int | None:
        return self.claim(record)

    async def aafter(self, thread: str, run: str, seq: int) -> list[Record]:
        return self.after(thread, run, seq)

    async def aabout(self, keys: Sequence[str]) -> list[Record]:
        return self.about(keys)

    def _add(self, record: Record) -> int:
        stored = record.stored(seq=(self._records[-1].seq if self._records else 0) + 1)
        self._records.append(stored)
        self._runs.setdefault((stored.thread, stored.run), []).append(stored)
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


@dataclass
class Book:
    """One run's records as this process has read them, in order (a cache: the store is read
    again for anything newer at every use)."""

    records: list[Record] = field(default_factory=list)
    seq: int = 0
    tally: Tally = field(default_factory=Tally)
    """The run's spend, permits and extensions, summed as records arrive."""

    def extend(self, more: Iterable[Record]) -> None:
        """Add what was read since; a record read already (two readers of one run at once)
        is skipped, so nothing is counted twice."""
        for record in more:
            if record.seq <= self.seq:
                continue
            self.records.append(record)
            self.tally.add(record)
            self.seq = record.seq


BOOKS = 256
"""Runs whose records one ledger keeps read at once (the least recently used go first)."""
SIGNED = 512
"""Records a ledger remembers signing until it reads them back (the oldest go first)."""


class Ledger:
    """A backend and the key its records are signed and checked with."""

    def __init__(self, backend: Backend, key: StoreKey | None = None) -> None:
        self.backend, self.key, self.keyed = backend, key or process_key(), key is not None
        self._in_process = getattr(backend, "in_process", False) is True
        self._books: OrderedDict[tuple[str, str], Book] = OrderedDict()
        self._signed: OrderedDict[str, Record] = OrderedDict()
        """What this ledger signed and has not read back yet, by signature: a row read back
        exactly as signed needs no second HMAC (the same proof: it was signed with the key)."""
        self._lock = threading.Lock()

    def sign(self, records: Iterable[Record]) -> list[Record]:
        if self._in_process:
            return [r.stored(verified=True) for r in records]
        signed = [r.signed(self.key) for r in records]
        with self._lock:
            for record in signed:
                self._signed[record.mac] = record
            while len(self._signed) > SIGNED:
                self._signed.popitem(last=False)
        return signed

    def append(self, records: Sequence[Record]) -> None:
        if records:
            self.backend.insert(self.sign(records))

    async def aappend(self, records: Sequence[Record]) -> None:
        if records:
            await self.backend.ainsert(self.sign(records))

    def claim(self, record: Record) -> bool:
        """Whether this call claimed ``record``'s key (no ``started`` record had it)."""
        return self.backend.claim(self.sign([record])[0]) is not None

    async def aclaim(self, record: Record) -> bool:
        return await self.backend.aclaim(self.sign([record])[0]) is not None

    def book(self, thread: str, run: str) -> Book:
        """The run's records, read up to now. (Each run's records become visible in the
        order of their ``seq``: the backends see to it, so reading from the last one seen
        misses nothing.)"""
        book = self._book(thread, run)
        book.extend(self._checked(self.backend.after(thread, run, book.seq)))
        return book

    async def abook(self, thread: str, run: str) -> Book:
        book = self._book(thread, run)
        book.extend(self._checked(await self.backend.aafter(thread, run, book.seq)))
        return book

    def last(self, thread: str) -> Book:
        """The record of the thread's newest run (an empty book when it has none)."""
        run = self.backend.last_run(thread)
        return self.book(thread, run) if run is not None else Book()

    async def alast(self, thread: str) -> Book:
        run = await self.backend.alast_run(thread)
        return await self.abook(thread, run) if run is not None else Book()

    def about(self, keys: Sequence[str]) -> list[Record]:
        """Every record about these call keys or call ids, in any thread."""
        return self._checked(self.backend.about(keys)) if keys else []

    async def aabout(self, keys: Sequence[str]) -> list[Record]:
        return self._checked(await self.backend.aabout(keys)) if keys else []

    def _checked(self, records: Iterable[Record]) -> list[Record]:
        if self._in_process:
            return list(records)
        checked = []
        for record in records:
            with self._lock:
                mine = self._signed.pop(record.mac, None)
            if mine is not None and _as_signed(mine, record):
                checked.append(mine.stored(seq=record.seq))
            else:
                checked.append(record.checked(self.key))
        return checked

    def _book(self, thread: str, run: str) -> Book:
        with self._lock:
            book = self._books.get((thread, run))
            if book is None:
                book = self._books[thread, run] = Book(tally=Tally(unkeyed=not self.keyed))
                while len(self._books) > BOOKS:
                    self._books.popitem(last=False)
            else:
                self._books.move_to_end((thread, run))
            return book


def _as_signed(signed: Record, read: Record) -> bool:
    """Whether ``read`` holds exactly what was signed: every field the signature covers."""
    return (signed.thread, signed.run, signed.kind, signed.key, signed.text, signed.at) == (
        read.thread, read.run, read.kind, read.key, read.text, read.at
    )  # fmt: skip


_LEDGERS: WeakKeyDictionary[Any, Ledger] = WeakKeyDictionary()
UNSAVED_RUNS = 1024
_UNSAVED = Ledger(MemoryBackend(UNSAVED_RUNS))
"""The ledger of graphs run without a checkpointer: the newest runs' records (nothing can
continue such a run; its result can still be read while it is kept)."""
_GUARD = threading.Lock()
_LAST: list[tuple[Callable[[], Any], Ledger]] = [(lambda: None, _UNSAVED)]
"""The saver asked for last (weakly) and its ledger."""


def ledger_for(saver: Any) -> Ledger:
    """The ledger beside ``saver`` (made once per saver)."""
    if saver is None:
        return _UNSAVED
    last = _LAST[0]
    if last[0]() is saver:  # every node of a step asks; a weak mapping's lookup is Python code
        return last[1]
    from gated_react.store.signed import unwrapped

    # The saver that holds the rows: LangGraph's server hands each request a new adapter
    # around the same saver, and a run's records must outlive the request.
    inner = unwrapped(saver)
    with _GUARD:
        found = _kept(inner)
        if found is None:
            found = _made_for(saver)
            _keep(inner, found)
        _LAST[0] = (weakref.ref(saver), found)
        return found


_ATTRIBUTE = "_gated_react_ledger"


def _kept(saver: Any) -> Ledger | None:
    found = getattr(saver, "__dict__", {}).get(_ATTRIBUTE)
    return found if isinstance(found, Ledger) else _LEDGERS.get(saver)


def _keep(saver: Any, ledger: Ledger) -> None:
    """The ledger kept on its saver: it goes with it (a SQL backend holds its saver, so a
    weak mapping from saver to ledger would keep every saver alive). A saver that takes no
    attributes (none of LangGraph's) is mapped weakly."""
    try:
        vars(saver)[_ATTRIBUTE] = ledger
    except TypeError:
        _LEDGERS[saver] = ledger


def _made_for(saver: Any) -> Ledger:
    from gated_react._engine.authority.sql import backend_for
    from gated_react.store.signed import key_of, unwrapped

    backend = backend_for(unwrapped(saver)) or MemoryBackend()
    return Ledger(backend, key_of(saver))


@dataclass(frozen=True, slots=True)
class Place:
    """Where a node's records go: its ledger and thread."""

    ledger: Ledger
    thread: str
    saved: bool
    """Whether the run has a checkpointer (without one, its records go at its end)."""

    @classmethod
    def of(cls, config: RunnableConfig) -> Place:
        saver = saver_of(config)
        thread, namespace = run_key(config)
        where = str(thread) if not namespace else f"{thread}|{namespace}"
        return cls(ledger_for(saver), where, saver is not None)

    def record(self, run: str, kind: Kind, key: str, **body: Any) -> Record:
        return Record(self.thread, run, kind, key, body)

    @property
    def awaited(self) -> bool:
        """Whether its records are read with ``await`` (an async saver's table)."""
        return getattr(self.ledger.backend, "synchronous", True) is False

    def usage(self, run: str) -> Usage:
        """What ``run`` has spent, as its record says now."""
        return self.ledger.book(self.thread, run).tally.usage()

    async def ausage(self, run: str) -> Usage:
        return (await self.ledger.abook(self.thread, run)).tally.usage()
