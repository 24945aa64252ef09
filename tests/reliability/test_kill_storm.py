"""SIGKILL at random points, at scale: every run is killed (up to three times) and resumed until
it ends. Zero runs lost (each ends, and the store holds exactly what the last process returned),
zero steps duplicated (history and trace equal an uninterrupted run's), zero non-idempotent calls
repeated (counted in a ledger file the tools write). On SQLite and Postgres.

``GATED_REACT_KILL_RUNS`` sets the runs per store (CI's default keeps it short; the figures in the
docs/guarantees.md come from 100), ``GATED_REACT_KILL_SEED`` the seed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ..support import procs
from .killstorm import Storm, storm_child

pytestmark = pytest.mark.slow
RUNS = int(os.environ.get("GATED_REACT_KILL_RUNS", "30"))
SEED = int(os.environ.get("GATED_REACT_KILL_SEED", "8"))


def test_kill_storm(
    store_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(procs, "child", storm_child)
    storm = Storm(store_url, tmp_path, SEED)
    started = time.monotonic()
    with procs.children(tmp_path) as kids:
        for number in range(RUNS):
            storm.one(kids, number)
    figures = storm.figures
    with capsys.disabled():
        store = store_url.split(":", 1)[0]
        print("\n" + figures.line(store, time.monotonic() - started))
    assert figures.runs == RUNS
    assert figures.lost_runs == 0
    assert figures.duplicated_steps == 0
    assert figures.repeated_unsafe_calls == 0
    assert figures.same_as_uninterrupted + figures.stopped_outcome_unknown == RUNS
    assert figures.kills >= RUNS // 2  # the storm really kills
    assert figures.traced_twice == 0  # a call let through, its reply lost, never ran
