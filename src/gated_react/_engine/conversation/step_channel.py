"""The step in hand as its channel holds it (``State.step``): written as plain JSON, read back
as a ``Step``.

Within a run, the dict a node writes is the very object LangGraph hands the next node (a
channel keeps the value written; a node reads it as is), so the first read of a dict this
process wrote returns the model it was dumped from instead of validating it again (a step is
written four times and read five). The entry goes with that read: nothing is kept past the
step it was written for, but the few steps a run never reads again (its last, an interrupted
one), at most ``KEPT``. Anything else (a checkpoint loaded on resume, a state edit, another
process's write, a second read) is validated. The step is never an authority (the run's record
is), and no tool or hook is shown it (``shown_state`` leaves it out), so nothing changes a
written dict in place; the models are never changed in place either (nodes copy them).
"""

from __future__ import annotations

import threading
from typing import Any

from gated_react.state import Step, dump

KEPT = 64
"""Steps remembered at once, the oldest dropped first: one per run in progress is enough."""

_WRITTEN: dict[int, tuple[dict[str, Any], Step]] = {}
"""By the id of each dict written: the dict itself (held, so its id is not reused while
kept) and the step it holds."""
_LOCK = threading.Lock()


def stored(step: Step) -> dict[str, Any]:
    """``step`` as its channel stores it, remembered for the next read."""
    written = dump(step)
    assert written is not None
    with _LOCK:
        _WRITTEN[id(written)] = (written, step)
        if len(_WRITTEN) > KEPT:
            del _WRITTEN[next(iter(_WRITTEN))]
    return written


def read(value: Any) -> Step:
    """The step a channel's value holds: the model a dict was written from, if this process
    wrote it and nothing read it yet; otherwise validated (``ValidationError`` when it is not
    a step)."""
    found = _WRITTEN.get(id(value))
    if found is not None and found[0] is value:
        with _LOCK:  # taken once: the next node's read of it, which needs it no more
            if _WRITTEN.get(id(value)) is found:
                del _WRITTEN[id(value)]
        return found[1]
    return Step.model_validate(value)
