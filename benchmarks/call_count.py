"""Python calls per step, counted (not timed): ``python -m benchmarks.call_count [STEPS ...]``,
or ``python -m benchmarks.call_count --turns [TURN ...]`` for a run on the TURN-th turn of a
thread (each earlier turn: 4 tool steps and an answer) against the same run on its first.

On a loaded machine a timed step moves by 20% or more between runs; the number of Python
function calls a run makes (every thread, via ``threading.setprofile``) does not. Printed per
step for ours and the floor, memory saver, ``invoke``, at each run length: a cost that grows
with the run shows as calls per step that grow with the steps.
"""

from __future__ import annotations

import json
import sys
import threading
import uuid
from typing import Any

from benchmarks.common import build, run_input
from benchmarks.stores import saver


def calls(peer: str, steps: int) -> int:
    count = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            count[0] += 1

    with saver("memory") as checkpointer:
        runnable = build(peer, steps, checkpointer)
        config = {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": 100_000}
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            runnable.invoke(run_input(peer), config)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    return count[0]


def calls_on_turn(turn: int, steps: int = 4) -> float:
    """Calls per step of a thread's ``turn``-th run, each run ``steps`` tool steps: what the
    earlier turns cost each decision of a later one."""
    count = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            count[0] += 1

    with saver("memory") as checkpointer:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        message = {"messages": [("user", "look up the records")]}
        for _ in range(turn - 1):
            build("ours", steps, checkpointer).invoke(message, config)
        runnable = build("ours", steps, checkpointer)
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            runnable.invoke(message, config)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    return count[0] / steps


def main() -> None:
    if sys.argv[1:2] == ["--turns"]:
        turns = [int(t) for t in sys.argv[2:]] or [1, 2, 10, 40]
        calls_on_turn(2)  # warm-up
        print(json.dumps({turn: round(calls_on_turn(turn)) for turn in turns}))
        return
    steps = [int(s) for s in sys.argv[1:]] or [10, 30, 100, 300]
    calls("ours", 3)  # warm-up: imports and caches
    calls("floor", 3)
    rows = {n: {p: round(calls(p, n) / n) for p in ("ours", "floor")} for n in steps}
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
