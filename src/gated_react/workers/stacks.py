"""What a worker is doing, on ``SIGUSR1``: every thread's stack and every asyncio task's, on
its standard error (the supervisor's log).

A worker that is alive and does nothing (its heartbeat late, no job moving) is a question of
where it waits. ``faulthandler`` writes the threads' stacks from C, so they come even when the
event loop is blocked in a call that never returns; then the loop, once it runs, writes where
each task waits (``Task.print_stack``). ``kill -USR1 <pid>``: the worker goes on.
"""

from __future__ import annotations

import asyncio
import faulthandler
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

SIGNAL = signal.SIGUSR1


@contextmanager
def showing() -> Iterator[None]:
    """Within the block, on ``SIGNAL``: the threads' stacks at once and the tasks' when the
    loop runs (this loop's handler first: ``faulthandler`` chains to it)."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(SIGNAL, tasks)
    err = _stderr()
    if err is not None:
        faulthandler.register(SIGNAL, file=err, all_threads=True, chain=True)
    try:
        yield
    finally:
        if err is not None:
            faulthandler.unregister(SIGNAL)
        loop.remove_signal_handler(SIGNAL)


def _stderr() -> TextIO | None:
    """Standard error as ``faulthandler`` writes to it (a file descriptor), if it has one:
    the process's own when ``sys.stderr`` was replaced by one without (a test's capture)."""
    for err in (sys.stderr, sys.__stderr__):
        try:
            if err is not None and err.fileno() >= 0:
                return err
        except (AttributeError, OSError, ValueError):
            continue
    return None


def tasks() -> None:
    """Every task of the running loop and where it waits, on standard error."""
    found = asyncio.all_tasks()
    print(f"{len(found)} asyncio tasks:", file=sys.stderr)
    for task in sorted(found, key=lambda t: t.get_name()):
        task.print_stack(limit=12, file=sys.stderr)
    sys.stderr.flush()
