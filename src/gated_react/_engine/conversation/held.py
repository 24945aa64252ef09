"""Values kept while a message lives: the caches a run's steps read on from.

A run's conversation only grows between its steps, and LangGraph hands each step the same
message objects. So what was worked out from a message (its token count, where a question
sits, a run's steps) is kept beside a weak reference to it and dropped when it is collected:
nothing outlives the conversation it was read from, and a stale entry (an id reused by a new
object) is never returned, because the reference must still point at the message asked about.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

from langchain_core.messages import BaseMessage

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Ref(weakref.ref[BaseMessage]):
    """A weak reference that holds its value and knows where it is kept: one callback for every
    entry, where a closure and a tuple per entry were five more objects for the garbage
    collector to track (a run keeps a few a step)."""

    __slots__ = ("key", "lock", "table", "value")
    key: Hashable
    value: Any
    table: dict[Any, _Ref]
    lock: threading.RLock


def _forget(gone: _Ref) -> None:
    # The table and lock are the reference's own, not looked up: at interpreter exit the
    # last messages may be collected after module globals are cleared.
    with gone.lock:
        if gone.table.get(gone.key) is gone:
            del gone.table[gone.key]


class Held(Generic[K, V]):
    """A table of values each held while its message lives (thread-safe)."""

    def __init__(self) -> None:
        self._table: dict[K, _Ref] = {}
        # Reentrant: a message collected while the table is locked (the garbage collector
        # runs at any allocation, ``put``'s included) calls ``_forget`` on the same thread.
        self._lock = threading.RLock()

    def get(self, key: K, message: BaseMessage | None = None) -> tuple[BaseMessage, V] | None:
        """The live message and value kept under ``key``; with ``message``, only if it is that
        very object. None when nothing is kept or its message is gone."""
        # one read of the table, atomic as a dict's get is: no lock (a step reads two dozen
        # values; ``put`` and ``_forget`` lock, as they read and then write)
        entry = self._table.get(key)
        if entry is None or (alive := entry()) is None:
            return None
        return None if message is not None and alive is not message else (alive, entry.value)

    def value_of(self, key: K, message: BaseMessage) -> V | None:
        """The value kept under ``key`` for that very ``message``, else None (``get`` without
        the pair: a request's messages are looked up one by one)."""
        entry = self._table.get(key)
        return entry.value if entry is not None and entry() is message else None

    def put(self, key: K, message: BaseMessage, value: V) -> None:
        """Keep ``value`` under ``key`` until ``message`` is collected."""
        ref = _Ref(message, _forget)
        ref.key, ref.value, ref.table, ref.lock = key, value, self._table, self._lock
        with self._lock:
            self._table[key] = ref

    def __len__(self) -> int:
        with self._lock:
            return len(self._table)
