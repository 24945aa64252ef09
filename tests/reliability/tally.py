"""Figures the reliability suite collects while it runs; the conftest prints them at the end.

``COUNTS`` holds what was checked (fuzz cases, runs, tool executions); ``SERIES`` holds
measurements worth reading in order (the soak's RSS, the 1 MB parse times). docs/guarantees.md
quotes the figures from the last full run.
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
