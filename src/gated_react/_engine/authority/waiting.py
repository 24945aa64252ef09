"""How long a tool call under way has taken, recorded while it runs.

A call's seconds are in its ``done`` record, written when it returns; a process killed in the
middle of a long call writes none. So while execute waits on a call it records a ``running``
record every beat (``deadline.BEAT_SECONDS``) with the seconds so far, and the run's spend
counts them until the call's ``done`` record replaces them. A beat the store cannot take ends
the wait (``Unrecorded``): time that goes unrecorded would be free on the resume. (A model
call's beat is the meter's: ``paying.Meter.beat``.)
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from gated_react._engine.authority.ledger import Place
from gated_react._engine.authority.records import Kind, Record
from gated_react.errors import Unrecorded
from gated_react.state import Call


@dataclass(slots=True)
class Running:
    """One call under way: where its records go, and when it started (``time.monotonic``)."""

    place: Place
    run: str
    call: Call
    started: float
    attempt: str = field(default_factory=lambda: os.urandom(8).hex())
    """This run of the call: one killed and run again on resume is another attempt, whose
    seconds add to the first's (its ``done`` record names it)."""

    def beat(self) -> None:
        """Record the seconds so far; ``Unrecorded`` if the store cannot (the call's time
        would be free: its wait ends, as a crash would end it)."""
        try:
            self.place.ledger.append([self._record()])
        except Exception as exc:
            raise unrecorded(self.call.tool, exc) from exc

    async def abeat(self) -> None:
        try:
            await self.place.ledger.aappend([self._record()])
        except Exception as exc:
            raise unrecorded(self.call.tool, exc) from exc

    def _record(self) -> Record:
        call = self.call
        seconds = time.monotonic() - self.started
        return self.place.record(self.run, Kind.RUNNING, call.key, call=call.id,
                                 tool=call.tool, seconds=seconds, attempt=self.attempt)  # fmt: skip


def unrecorded(what: str, error: Exception) -> Unrecorded:
    return Unrecorded(
        f"the run's store could not record how long {what} has taken "
        f"({type(error).__name__}: {str(error)[:200]}); the call was abandoned, as a crash "
        "would leave it: resume the run once the store answers"
    )
