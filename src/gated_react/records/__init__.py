"""What every host reads and writes about runs: the CLI, the workers and Studio alike.

A run's events (``events``), its run log in a file or the store's table (``run_log``), the
listings of runs and open questions (``run_listing``, ``question_listing``; ``windows``: ages and
dates as checkpoint ids), the workers' queue as a client sees it:
its names and enqueueing (``queue``), its jobs (``queue_listing``); every table a thread is
written to, and a thread deleted from all of them (``places``). Neither ``cli`` nor
``workers`` imports the other; both import this (``make lint`` checks it).

Modules load on first import (``gated_react.records.run_log``...), so the CLI's start stays quick.
"""

from __future__ import annotations

from gated_react.errors import GatedReactError


class RecordError(GatedReactError):
    """A record a host asked for cannot be opened or read (a run log, a stored checkpoint, the
    queue): one line its user can act on. The CLI shows it and exits 1; a worker logs it."""
