"""The store key's cost (issue 28 item 7): CPU per step of the same scripted run on SQLite with
and without ``open_checkpointer(url, key=...)``, side by side in one process, and the CPU to read
the finished thread back (``get_state``: the latest checkpoint and the history a DeltaChannel is
rebuilt from, every row checked). On a loaded machine the difference of two medians is noisy, so
the CPU spent inside the signing and checking code itself (thread time, on whichever thread the
saver runs) is measured too, in the keyed runs."""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import Stat, build, ratio, run_input, timed
from benchmarks.stores import KEY
from gated_react.store import signed
from gated_react.store.checkpointer import open_checkpointer

DURABILITIES = ("sync", "async", "exit")


_SIGNING = [(signed.SignedSaver, "_signed"), (signed.SignedSaver, "_sealed")]
_CHECKING = [(signed.SignedSaver, "_checked"), (signed._History, "target"),
             (signed._History, "ancestor")]  # fmt: skip


@contextmanager
def _inside(spent: dict[str, float]) -> Iterator[None]:
    """Thread CPU seconds spent in the key's own code, by what it did (signing, checking)."""
    saved = []
    for what, methods in (("sign", _SIGNING), ("check", _CHECKING)):
        for owner, name in methods:
            saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, _timed(getattr(owner, name), what, spent))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _timed(fn: Callable[..., Any], what: str, spent: dict[str, float]) -> Callable[..., Any]:
    def timed_call(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[what] = spent.get(what, 0.0) + time.thread_time() - began

    return timed_call


def _one(steps: int, key: str | None, durability: str) -> tuple[float, float, float]:
    """Wall and CPU seconds of one run, and the CPU seconds of reading it back."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        open_checkpointer(str(Path(tmp) / "runs.sqlite"), key=key) as saver,
    ):
        runnable = build("ours", steps, saver)
        config: dict[str, Any] = {
            "configurable": {"thread_id": uuid.uuid4().hex},
            "recursion_limit": 100_000,
        }
        wall, cpu = timed(lambda: runnable.invoke(run_input("ours"), config, durability=durability))
        _, read_cpu = timed(lambda: runnable.get_state(config))
        return wall, cpu, read_cpu


def measure(quick: bool) -> list[dict[str, Any]]:
    reps, steps = (3, 10) if quick else (9, 30)
    rows = []
    for durability in DURABILITIES[1:2] if quick else DURABILITIES:
        got: dict[str, dict[str, list[float]]] = {
            k: {"wall": [], "cpu": [], "read": []} for k in ("without", "with")
        }
        for key in (None, KEY):  # warm-up
            _one(5, key, durability)
        inside: dict[str, list[float]] = {"sign": [], "check": []}
        for _ in range(reps):  # interleaved, so noise hits both alike
            for name, key in (("without", None), ("with", KEY)):
                wall, cpu, read = _one(steps, key, durability)
                got[name]["wall"].append(wall / steps * 1e3)
                got[name]["cpu"].append(cpu / steps * 1e3)
                got[name]["read"].append(read * 1e3)
            spent: dict[str, float] = {}
            with _inside(spent):
                _one(steps, KEY, durability)
            for what, values in inside.items():
                values.append(spent.get(what, 0.0) * 1e3)
        row: dict[str, Any] = {"store": "sqlite", "durability": durability, "steps": steps}
        for name, values in got.items():
            row[f"{name}_key"] = {
                "wall_ms_per_step": Stat.of(values["wall"]).json(),
                "cpu_ms_per_step": Stat.of(values["cpu"]).json(),
                "read_cpu_ms": Stat.of(values["read"]).json(),
            }
        cpu_with, cpu_without = (Stat.of(got[n]["cpu"]).median for n in ("with", "without"))
        row["cpu_ms_per_step_added"] = round(cpu_with - cpu_without, 3)
        row["ratio_cpu"] = ratio(cpu_with, cpu_without)
        read_with, read_without = (Stat.of(got[n]["read"]).median for n in ("with", "without"))
        row["ratio_read_cpu"] = ratio(read_with, read_without)
        # signing happens while the run goes (per step); checking mostly when it is read back
        row["inside_sign_ms_per_step"] = Stat.of([v / steps for v in inside["sign"]]).json()
        row["inside_check_ms_per_run"] = Stat.of(inside["check"]).json()
        rows.append(row)
    return rows


if __name__ == "__main__":
    import json

    print(json.dumps(measure(quick=False), indent=1))
