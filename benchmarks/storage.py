"""3. Checkpoint storage: bytes in the SQLite file after runs of 10, 30 and 100 steps."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import build, ratio, run_input
from benchmarks.stores import sqlite_bytes
from gated_react.store.checkpointer import open_checkpointer

PEERS = ("ours", "create_agent", "create_react_agent")


def file_bytes(peer: str, steps: int) -> int:
    """Size of a fresh SQLite store after one run of ``steps`` steps."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.sqlite"
        with open_checkpointer(str(path)) as saver:
            runnable = build(peer, steps, saver)
            config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100_000}
            runnable.invoke(run_input(peer), config, durability="sync")
        return sqlite_bytes(path)


def measure(quick: bool) -> list[dict[str, Any]]:
    rows = []
    for steps in (10, 30) if quick else (10, 30, 100):
        row: dict[str, Any] = {"steps": steps}
        for peer in PEERS:
            size = file_bytes(peer, steps)
            row[peer] = {"bytes": size, "bytes_per_step": round(size / steps)}
        for peer in PEERS[1:]:
            row[f"ratio_vs_{peer}"] = ratio(row["ours"]["bytes"], row[peer]["bytes"])
        rows.append(row)
    return rows
