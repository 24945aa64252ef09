"""What the branch check costs a run whose tool is not idempotent: CPU per step on SQLite, with
the check and with it replaced by "no branch", interleaved, medians of ``REPEATS`` runs of
``STEPS`` steps (``python -m benchmarks.branch_check``). Idempotent tools never pay it."""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from typing import Any

from langchain_core.tools import tool

from gated_react import Budget, Policy, build_graph, open_checkpointer
from gated_react.nodes import execute
from gated_react.testing import ScriptedChatModel, call

STEPS, REPEATS = 20, 15
CHECK = execute.on_a_branch


@tool
def pay(n: int) -> str:
    """Pays (not idempotent)."""
    return f"paid {n}"


def _per_step(saver: Any, check: bool) -> float:
    execute.on_a_branch = CHECK if check else (lambda config, ids: False)  # type: ignore[assignment]
    model = ScriptedChatModel(replies=[*(call("pay", n=i) for i in range(STEPS)), "done"])
    budget = Budget(max_steps=STEPS + 1, max_tool_calls=STEPS, max_seconds=1e6)
    graph = build_graph(model, [pay], policy=Policy(budget=budget), checkpointer=saver)
    config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
    started = time.process_time()
    out = graph.invoke({"goal": "pay them"}, config)
    assert out["stop_reason"] == "success", out["stop_reason"]
    return (time.process_time() - started) / STEPS


def main() -> None:
    with tempfile.TemporaryDirectory() as folder, open_checkpointer(f"{folder}/r.db") as saver:
        _per_step(saver, True), _per_step(saver, False)  # warm-up
        runs = [(_per_step(saver, True), _per_step(saver, False)) for _ in range(REPEATS)]
    execute.on_a_branch = CHECK
    checked = statistics.median(a for a, _ in runs)
    unchecked = statistics.median(b for _, b in runs)
    print(
        f"CPU per step, SQLite, a tool that is not idempotent: {checked * 1e3:.2f} ms with the "
        f"branch check, {unchecked * 1e3:.2f} ms without: {checked / unchecked:.3f}x"
    )


if __name__ == "__main__":
    main()
