"""5. Resume: from a new process to the first resumed node of a crashed run, in an SQLite store
that already holds about 10,000 checkpoints."""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import CRASH_AT, ScriptModel, build_with, run_input

NODES = ("decide", "validate", "gate", "execute", "observe", "finish", "stop")
CRASH_STEP = 60
CHILD = """
import sys, time, json
from langchain_core.callbacks import BaseCallbackHandler
from benchmarks.common import ScriptModel, build_with
from gated_react import open_checkpointer, resume
imported = time.time()
first = {}

class FirstNode(BaseCallbackHandler):
    def on_chain_start(self, serialized, inputs, **kwargs):
        if kwargs.get("name") in %(nodes)r:
            first.setdefault("t", time.time())
            first.setdefault("name", kwargs["name"])

with open_checkpointer(sys.argv[1]) as saver:
    model = ScriptModel(steps=%(steps)d, skip=%(skip)d)
    graph = build_with(model, "ours", %(steps)d, saver).with_config(callbacks=[FirstNode()])
    out = resume(graph, "crashed")
print(json.dumps({"imported": imported, "first_node": first["t"], "node": first["name"],
                  "stop_reason": out["stop_reason"], "steps": len(out["history"])}))
"""


def seed_store(path: Path, checkpoints: int) -> int:
    """Finished 100-step runs until the store holds ``checkpoints``, then a run that crashed
    inside ``execute`` at step ``CRASH_STEP``."""
    from gated_react import open_checkpointer

    with open_checkpointer(str(path)) as saver:
        for i in range(checkpoints // 500):
            graph = build_with(ScriptModel(steps=100), "ours", 100, saver)
            graph.invoke(run_input("ours"), {"configurable": {"thread_id": f"done-{i}"}})
        crashed = build_with(ScriptModel(steps=CRASH_STEP + 5), "ours", CRASH_STEP + 5, saver)
        CRASH_AT.append(CRASH_STEP)
        try:
            crashed.invoke(
                run_input("ours"), {"configurable": {"thread_id": "crashed"}}, durability="sync"
            )
        except KeyboardInterrupt:
            pass
        finally:
            CRASH_AT.clear()
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])


def _once(path: Path) -> dict[str, Any]:
    code = CHILD % {"nodes": NODES, "steps": CRASH_STEP + 5, "skip": CRASH_STEP}
    launched = time.time()
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    child = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "to_first_node_s": child["first_node"] - launched,
        "imports_s": child["imported"] - launched,
        "beyond_imports_s": child["first_node"] - child["imported"],
        "node": child["node"],
        "stop_reason": child["stop_reason"],
        "steps": child["steps"],
    }


def measure(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.sqlite"
        checkpoints = seed_store(path, 2_000 if quick else 10_000)
        samples = []
        for _ in range(3 if quick else 5):  # each resume finishes the run: resume a fresh copy
            copy = Path(tmp) / "copy.sqlite"
            copy.write_bytes(path.read_bytes())
            samples.append(_once(copy))
    result: dict[str, Any] = {
        "checkpoints": checkpoints,
        "crashed_at_step": CRASH_STEP,
        "first_node": samples[0]["node"],
        "stop_reason": samples[0]["stop_reason"],
        "history_after_resume": samples[0]["steps"],
    }
    for key in ("to_first_node_s", "imports_s", "beyond_imports_s"):
        values = [s[key] for s in samples]
        result[key] = {
            "median": round(statistics.median(values), 3),
            "min": round(min(values), 3),
            "max": round(max(values), 3),
        }
    return result
