"""Figures the reliability suite collects while it runs; the conftest prints them at the end.

``COUNTS`` holds what was checked (fuzz cases, runs, tool executions); ``SERIES`` holds
measurements worth reading in order (the soak's RSS, the 1 MB parse times). docs/guarantees.md
quotes the figures from the last full run. Under pytest-xdist each worker holds its own: it
hands a ``snapshot()`` to the controller at its end, which ``merge``s them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

COUNTS: Counter[str] = Counter()
SERIES: dict[str, list[Any]] = {}


def count(name: str, n: int = 1) -> None:
    COUNTS[name] += n


def record(name: str, value: Any) -> None:
    SERIES.setdefault(name, []).append(value)


KEY = "gated_react_tally"
"""Where a worker leaves its figures in ``config.workeroutput``."""


def snapshot() -> dict[str, Any]:
    return {"counts": dict(COUNTS), "series": SERIES}


def merge(figures: dict[str, Any] | None) -> None:
    if figures:
        COUNTS.update(figures["counts"])
        for name, values in figures["series"].items():
            SERIES.setdefault(name, []).extend(values)
