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
from typing import Generic, TypeVar

from langchain_core.messages import BaseMessage

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Held(Generic[K, V]):
    """A table of values each held while its message lives (thread-safe)."""

    def __init__(self) -> None:
        self._table: dict[K, tuple[weakref.ref[BaseMessage], V]] = {}
        # Reentrant: a message collected while the table is locked (the garbage collector
        # runs at any allocation, ``put``'s included) calls ``forget`` on the same thread.
        self._lock = threading.RLock()

    def get(self, key: K, message: BaseMessage | None = None) -> tuple[BaseMessage, V] | None:
        """The live message and value kept under ``key``; with ``message``, only if it is that
        very object. None when nothing is kept or its message is gone."""
        # one read of the table, atomic as a dict's get is: no lock (a step reads two dozen
        # values; ``put`` and ``forget`` lock, as they read and then write)
        entry = self._table.get(key)
        if entry is None or (alive := entry[0]()) is None:
            return None
        return None if message is not None and alive is not message else (alive, entry[1])

    def put(self, key: K, message: BaseMessage, value: V) -> None:
        """Keep ``value`` under ``key`` until ``message`` is collected."""
        # The table and lock are bound to the callback, not looked up: at interpreter exit the
        # last messages may be collected after module globals are cleared.
        table, lock = self._table, self._lock

        def forget(gone: weakref.ref[BaseMessage]) -> None:
            with lock:
                if (held := table.get(key)) is not None and held[0] is gone:
                    del table[key]

        with lock:
            table[key] = (weakref.ref(message, forget), value)

    def __len__(self) -> int:
        with self._lock:
            return len(self._table)
