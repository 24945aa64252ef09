"""2. Prompt tokens sent to the model over a whole run, and per step (the curve)."""

from __future__ import annotations

from typing import Any

from benchmarks.common import ScriptModel, build_with, ratio, run_input

PEERS = ("ours", "create_agent", "create_react_agent", "plain_loop")


def measure(quick: bool) -> list[dict[str, Any]]:
    rows = []
    for steps in (10, 30) if quick else (10, 30, 100):
        row: dict[str, Any] = {"steps": steps}
        for peer in PEERS:
            model = ScriptModel(steps=steps, count_prompts=True)
            build_with(model, peer, steps).invoke(run_input(peer), {"recursion_limit": 100_000})
            counts = model.prompt_tokens
            row[peer] = {
                "total": sum(counts),
                "first_step": counts[0],
                "last_step": counts[-1],
                "curve": counts[:: max(1, len(counts) // 10)],
            }
        for peer in PEERS[1:]:
            row[f"ratio_vs_{peer}"] = ratio(row["ours"]["total"], row[peer]["total"])
        rows.append(row)
    return rows
