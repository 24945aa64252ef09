"""1. Framework time per ReAct step, per checkpointer and durability mode."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from benchmarks.common import PEERS, Stat, build, ratio, run_input, timed
from benchmarks.stores import saver

CONFIGS_FULL = [("none", None), *itertools.product(("memory", "sqlite"), ("sync", "async", "exit"))]
CONFIGS_QUICK = [("none", None), ("memory", "async"), ("sqlite", "async")]


def _one(peer: str, steps: int, store: str, durability: str | None) -> tuple[float, float]:
    with saver(store) as checkpointer:
        runnable = build(peer, steps, checkpointer)
        config: dict[str, Any] = {
            "configurable": {"thread_id": uuid.uuid4().hex},
            "recursion_limit": 100_000,
        }
        kwargs = {"durability": durability} if durability and peer != "plain_loop" else {}
        return timed(lambda: runnable.invoke(run_input(peer), config, **kwargs))


def measure(quick: bool) -> list[dict[str, Any]]:
    rows = []
    reps = 3 if quick else 7
    for (store, durability), steps in itertools.product(
        CONFIGS_QUICK if quick else CONFIGS_FULL, (20,) if quick else (20, 100)
    ):
        peers = [p for p in PEERS if store == "none" or p != "plain_loop"]
        wall: dict[str, list[float]] = {p: [] for p in peers}
        cpu: dict[str, list[float]] = {p: [] for p in peers}
        for peer in peers:  # warm-up
            _one(peer, 5, store, durability)
        for _ in range(reps):  # interleaved, so noise hits every peer alike
            for peer in peers:
                w, c = _one(peer, steps, store, durability)
                wall[peer].append(w / steps * 1e3)
                cpu[peer].append(c / steps * 1e3)
        row: dict[str, Any] = {"store": store, "durability": durability or "-", "steps": steps}
        for peer in peers:
            row[peer] = {
                "wall_ms_per_step": Stat.of(wall[peer]).json(),
                "cpu_ms_per_step": Stat.of(cpu[peer]).json(),
            }
        for peer in peers[1:]:
            row[f"ratio_vs_{peer}"] = {
                "wall": ratio(Stat.of(wall["ours"]).median, Stat.of(wall[peer]).median),
                "cpu": ratio(Stat.of(cpu["ours"]).median, Stat.of(cpu[peer]).median),
            }
        rows.append(row)
    return rows
