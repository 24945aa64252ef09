"""The run's time left, shared by the calls of a step: they run at once and each counts its own
seconds, so together they may take what is left. A call that ends hands what it did not use
to those still running, whose end moves later (``deadline``'s waits ask again at their end)."""

from __future__ import annotations

import math
import threading
import time


class Shares:
    """The seconds ``left`` to the calls of one step; ``until()`` is when those running must
    have ended (``time.monotonic()``'s clock), so that all of them together take no more."""

    def __init__(self, left: float = math.inf) -> None:
        self.left = left
        self._lock = threading.Lock()  # the calls of a sync step run on threads of their own
        self._running: dict[int, float] = {}
        self._used = 0.0

    def begin(self, indices: list[int], at: float) -> None:
        """The calls start, all at ``at``: each one's end is known from its first moment (a
        call that signed in alone before the others would take the whole of what is left)."""
        with self._lock:
            self._running.update(dict.fromkeys(indices, at))

    def started(self, index: int) -> float:
        """When call ``index`` began, as its share counts it: what its seconds are counted
        from, so a call cut off at ``until()`` counts all of the share it was given."""
        with self._lock:
            return self._running.get(index, time.monotonic())

    def end(self, index: int, at: float) -> None:
        """Call ``index`` ended at ``at``: what it took is used, the rest is the others'."""
        with self._lock:
            self._used += at - self._running.pop(index, at)

    def until(self) -> float:
        # used + sum(T - started) <= left, over the k calls running, when all run until T
        if self.left == math.inf:
            return math.inf
        with self._lock:
            count = len(self._running)
            if not count:
                return math.inf
            return (self.left - self._used + sum(self._running.values())) / count
