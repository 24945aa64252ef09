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

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

from langchain_core.runnables import RunnableConfig

from gated_react._engine.authority.backends import Backend, MemoryBackend
from gated_react._engine.authority.records import Kind, Record, process_key
from gated_react._engine.authority.spend import Tally
from gated_react._engine.langgraph_internals import resuming, run_key, running_config, saver_of
from gated_react.policy import Budget
from gated_react.state import Usage
from gated_react.store.key import StoreKey
from gated_react.store.rows import record_thread


@dataclass
class Book:
    """One run's records as this process has read them, in order (a cache: the store is read
    again for anything newer at every use)."""

    records: list[Record] = field(default_factory=list)
    seq: int = 0
    tally: Tally = field(default_factory=Tally)
    """The run's spend, permits and extensions, summed as records arrive."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def extend(self, more: Iterable[Record]) -> None:
        """Add what was read since; a record read already (two readers of one run at once,
        on two threads) is skipped, so nothing is counted twice."""
        with self._lock:
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
        self._books: OrderedDict[tuple[str, str | None], Book] = OrderedDict()
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

    def book(self, thread: str, run: str | None) -> Book:
        """The run's records (with ``run`` None, the thread's, every run's), read up to now.
        (A thread's records become visible in the order of their ``seq``: the backends see
        to it, so reading from the last one seen misses nothing.)"""
        book = self._book(thread, run)
        book.extend(self._checked(self.backend.after(thread, run, book.seq)))
        return book

    async def abook(self, thread: str, run: str | None) -> Book:
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

    def renew(self, thread: str) -> None:
        """Before a run opens: what this ledger read of the thread is read again if its oldest
        record is gone from the store (the thread deleted, maybe by another process, and begun
        again under its id: its runs' ids come again too). A query only where the thread was
        read in this process."""
        held = self._oldest(thread)
        if held is not None and not self._still(held, self.backend.first(thread)):
            self.forget_thread(thread)

    async def arenew(self, thread: str) -> None:
        held = self._oldest(thread)
        if held is not None and not self._still(held, await self.backend.afirst(thread)):
            self.forget_thread(thread)

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
                # the row's own record (its body read from the text signed), not the one held
                # here: what passes on is what the store holds
                verified = True
            else:
                verified = record.holds(self.key)
            # the text was for the check: a book keeps the body alone (a result may be 20,000
            # characters, and a book a run's every record)
            checked.append(record.stored(verified=verified, text=""))
        return checked

    def _oldest(self, thread: str) -> int | None:
        with self._lock:
            books = [b for (t, _), b in self._books.items() if t == thread and b.records]
        return min((b.records[0].seq for b in books), default=None)

    @staticmethod
    def _still(held: int, stored: int | None) -> bool:
        """Whether the store holds the oldest record read of a thread (``held``), given the
        thread's oldest stored one: a record's number is never used again, so a thread deleted
        and written again starts after every number read of it before."""
        return stored is not None and stored <= held

    def forget_thread(self, thread: str) -> None:
        """Drop what was read of ``thread``: its books are read from the store again."""
        with self._lock:
            for key in [key for key in self._books if key[0] == thread]:
                del self._books[key]

    def _book(self, thread: str, run: str | None) -> Book:
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

    inner = unwrapped(saver)
    backend = backend_for(inner) or MemoryBackend().beside(inner)
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
        return cls(ledger_for(saver), record_thread(str(thread), namespace), saver is not None)

    def record(self, run: str, kind: Kind, key: str, **body: Any) -> Record:
        return Record(self.thread, run, kind, key, body)

    def resumed(self, config: RunnableConfig) -> None:
        """On a pass's first step that goes on from a stored checkpoint (a human's answer, a
        resume after a crash), before the node reads the record: the run may have been begun
        in another process, of the thread deleted and begun again there since this one read
        it (``Ledger.renew``)."""
        if resuming(config):
            self.ledger.renew(self.thread)

    async def aresumed(self, config: RunnableConfig) -> None:
        if resuming(config):
            await self.ledger.arenew(self.thread)

    @classmethod
    def reread(cls) -> None:
        """``resumed`` for a node that reads no record (validate, observe), sync or async
        alike: on a pass's first step that goes on from a stored checkpoint, what this process
        read of the thread is dropped, and the next node that reads the record reads it anew
        (LangGraph flags a pass's first step only, so that node could not tell). Nothing
        outside a graph (a node called by hand)."""
        config = running_config()
        if config is not None and resuming(config):
            place = cls.of(config)
            place.ledger.forget_thread(place.thread)

    @property
    def awaited(self) -> bool:
        """Whether its records are read with ``await`` (an async saver's table)."""
        return getattr(self.ledger.backend, "synchronous", True) is False

    def whole(self, budget: Budget, *, tools: bool) -> Book | None:
        """The thread's record, every run's, when ``budget`` holds a limit across its runs on
        its tool calls (``tools``: the gate's checks) or its model decisions (a model call's)."""
        return self.ledger.book(self.thread, None) if budget.per_thread(tools=tools) else None

    async def awhole(self, budget: Budget, *, tools: bool) -> Book | None:
        held = budget.per_thread(tools=tools)
        return await self.ledger.abook(self.thread, None) if held else None

    def usage(self, run: str) -> Usage:
        """What ``run`` has spent, as its record says now."""
        return self.ledger.book(self.thread, run).tally.usage()

    async def ausage(self, run: str) -> Usage:
        return (await self.ledger.abook(self.thread, run)).tally.usage()
