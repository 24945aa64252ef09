"""1b. CPU per step as a run grows (10, 30, 100, 300 steps), against the floor and create_agent.

Issue 32's second figure: a step at 300 steps should cost within 10% of a step at 30. Each row
times whole runs of ours, the five-node floor and ``create_agent`` on a fresh store, interleaved;
``create_agent`` resends and re-stores its whole transcript, so it is left out past 100 steps
(its per-step cost grows with the run by design, and a 300-step run takes minutes).
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

from benchmarks.common import Stat, build, ratio, run_input, timed
from benchmarks.stores import postgres_url, saver

# (store, durability, call): call "invoke" or "ainvoke"
CONFIGS_FULL = [
    ("memory", "async", "invoke"),
    ("memory", "async", "ainvoke"),
    ("sqlite", "sync", "invoke"),
    ("sqlite", "async", "invoke"),
    ("postgres", "sync", "invoke"),
]
CONFIGS_QUICK = [("memory", "async", "invoke"), ("sqlite", "sync", "invoke")]
STEPS_FULL = (10, 30, 100, 300)
STEPS_QUICK = (10, 30)
PEERS = ("ours", "floor", "create_agent")
CA_MAX_STEPS = 100


def one(peer: str, steps: int, store: str, durability: str, call: str) -> tuple[float, float]:
    """Wall and CPU seconds of one whole run of ``peer``."""
    with saver(store) as checkpointer:
        runnable = build(peer, steps, checkpointer)
        config: dict[str, Any] = {
            "configurable": {"thread_id": uuid.uuid4().hex},
            "recursion_limit": 100_000,
        }
        if call == "ainvoke":
            coro = runnable.ainvoke(run_input(peer), config, durability=durability)
            return timed(lambda: asyncio.run(coro))
        return timed(lambda: runnable.invoke(run_input(peer), config, durability=durability))


def configs(quick: bool) -> list[tuple[str, str, str]]:
    chosen = CONFIGS_QUICK if quick else CONFIGS_FULL
    return [c for c in chosen if c[0] != "postgres" or postgres_url()]


def measure(quick: bool, reps: int | None = None) -> list[dict[str, Any]]:
    rows = []
    reps = reps or (3 if quick else 7)
    for (store, durability, call), steps in itertools.product(
        configs(quick), STEPS_QUICK if quick else STEPS_FULL
    ):
        peers = [p for p in PEERS if p != "create_agent" or steps <= CA_MAX_STEPS]
        cpu: dict[str, list[float]] = {p: [] for p in peers}
        for peer in peers:  # warm-up
            one(peer, 3, store, durability, call)
        for _ in range(reps):  # interleaved, so noise hits every runtime alike
            for peer in peers:
                cpu[peer].append(one(peer, steps, store, durability, call)[1] / steps * 1e3)
        row: dict[str, Any] = {
            "store": store,
            "durability": durability,
            "call": call,
            "steps": steps,
            "reps": reps,
        }
        for peer in peers:
            row[peer] = {"cpu_ms_per_step": Stat.of(cpu[peer]).json()}
        for peer in peers[1:]:
            row[f"ratio_vs_{peer}"] = {
                "cpu": ratio(Stat.of(cpu["ours"]).median, Stat.of(cpu[peer]).median)
            }
        rows.append(row)
    return rows
