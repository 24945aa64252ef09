"""Which calls the gate let through, as only the process that ran the gate knows it.

Everything in a thread's state is data a caller of LangGraph's state API can write:
``update_state`` with any ``as_node``, a ``Command(update=..., goto="execute")``, a ``Send``,
a fork, the server's REST endpoints. Checkpoint metadata is no proof either: a ``Command``'s
update lands as pending writes on a checkpoint marked ``source: "loop"``. So the gate's decision
is not read back from the state. The gate hands each admitted step to this registry (its
calls, exactly as written, for its thread), and ``execute`` takes it back: a step it finds here
is the one the gate just checked in this process; a step it does not find (any edit, a forged
command, a replay, a resume in another process after a crash) is checked again in full by
``execute``, a human asked again where the policy wants one.

A taken entry is gone, so a step runs once on one admission; the registry is bounded, so a
process that admits many steps nobody executes (interrupted before ``execute``) keeps only the
newest. It is one per process, not one per graph, because the LangGraph server builds the graph
anew for every run: a step held before ``execute`` (``interrupt_before``) and continued by the
next run is still known. Entries are scoped by the policy's hash and the tools' names, so a graph
under another policy never takes a step this one admitted.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig

from gated_react._engine.call_keys import canonical_json, short_hash
from gated_react.state import Call, dump
from gated_react.stops import Stop, StopReason

_KEPT = 4096
"""Admitted steps remembered at once: far more than the runs one process has in flight."""


class Admissions:
    """The gate's admitted steps not yet executed, by thread and exact calls (thread-safe: the
    sync graph runs nodes on pool threads)."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def grant(self, scope: str, config: RunnableConfig, calls: Sequence[Call]) -> None:
        """Record a step the gate let through: these calls, in this order, on this thread."""
        key = _key(scope, config, calls)
        with self._lock:
            self._held[key] = None
            self._held.move_to_end(key)
            while len(self._held) > _KEPT:
                self._held.popitem(last=False)

    def take(self, scope: str, config: RunnableConfig, calls: Sequence[Call]) -> bool:
        """True, once, when the gate let exactly these calls through on this thread."""
        key = _key(scope, config, calls)
        with self._lock:
            return self._held.pop(key, False) is None


ADMITTED = Admissions()
"""This process's admitted steps."""


def _key(scope: str, config: RunnableConfig, calls: Sequence[Call]) -> str:
    thread = str(config.get("configurable", {}).get("thread_id", "-"))
    shown: list[Any] = [dump(call) for call in calls]
    return short_hash(f"{scope}\n{thread}\n{canonical_json(shown)}", 32)


def sent(node: str) -> dict[str, Any]:
    """The stop of a policy node that a ``Send`` reached: a Send carries a state of its own
    (counters, calls) that no node of this run wrote, so nothing in it is checked or run."""
    why = (
        f"{node} was reached by a Send carrying its own state, which no node of this run "
        "wrote; nothing was checked or run"
    )
    return Stop(StopReason.INVALID_ACTION, "sent", why).update()
