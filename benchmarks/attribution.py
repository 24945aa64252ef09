"""Where a step's instructions go: ``python -m benchmarks.attribution [--steps N] [--head SRC]``.

Issue 32 asks for a step within 1.2x the five-node floor. This splits what a step of ours costs
above the floor into what LangGraph charges for the graph's width and what the node bodies do,
each counted as ``benchmarks.instructions`` counts (cachegrind, memory saver, sync ``invoke``:
a child that runs N steps less one that never runs the second graph, over N):

- **width**: ``benchmarks/wide_floor.py``, the floor's trivial nodes writing the channels ours
  write (14 a tool step, against the floor's 5) behind four routers, against the floor;
- **a node's body**: one child records every update the node returns in a run, another returns
  those updates in the same order without running the node; the difference over N is what the
  body costs, the LangGraph around it left in. The floor's decide and execute the same way:
  they call the model and the tool, as ours do, so what ours costs above them is ours.

A second table frames the target. Both graphs with every node replayed at once are what
LangGraph alone charges for their supersteps; the floor with ``EXTRA`` more channels
(``benchmarks/wide_floor.py``: set once, or written every step) prices a channel that holds a
value and a write. Our graph with bodies as cheap as the floor's is the least it can cost; what
1.2x the floor leaves above that is the room our node bodies have.

Replaying the gate leaves execute without the permits the gate writes in the run's record, so
execute sends the calls through the gate's checks again: the gate's figure is a lower bound
(its checks are counted in execute too). Slow: 28 children under valgrind (and 9 that record),
about 8 minutes at 20 steps on two cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.instructions import instructions_of
from benchmarks.report import _table
from benchmarks.wide_floor import EXTRA

NODES = ("decide", "validate", "gate", "execute", "observe")
FLOOR_NODES = ("decide", "execute")

_CHILD = """
import functools, pickle, sys
from benchmarks.common import build
from benchmarks.run_length import one
from benchmarks.stores import saver
peer, steps, node, mode, path, admit = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
if peer == "ours":
    import gated_react.graph as home
else:
    import benchmarks.floor as home
kept = {}
# Runs get the same thread ids in the child that records and in those that replay: a step
# names its run, whose id follows from the thread's, and a step of another run is refused.
import itertools, uuid, benchmarks.run_length as lengths
_ids = itertools.count()
lengths.uuid = type("ids", (), {"uuid4": staticmethod(lambda: uuid.UUID(int=next(_ids)))})

def replaced(name, file):
    body = getattr(home, name)
    if mode == "replay":
        updates = iter(pickle.load(open(file, "rb")))
    else:
        updates = kept[file] = []

    @functools.wraps(body)
    def wrapped(*args, **kwargs):
        if mode == "replay":
            return next(updates)
        update = body(*args, **kwargs)
        updates.append(update)
        return update

    setattr(home, name, wrapped)

for each in (() if node == "-" else NODES if node == "all" else [node]):
    replaced(each if peer == "ours" else "_" + each, f"{path}.{each}")
if kept:
    import atexit
    atexit.register(lambda: [pickle.dump(u, open(f, "wb")) for f, u in kept.items()])
one(peer, 3, "memory", "async", "invoke")
if steps:
    one(peer, steps, "memory", "async", "invoke")
else:
    with saver("memory") as checkpointer:
        build(peer, 3, checkpointer)
"""


def _child(src: str | None, args: list[str], counted: bool = True) -> int:
    """One child process (under cachegrind when ``counted``); its instructions, or 0."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join([p for p in (src, root) if p])
    command = [sys.executable, "-c", f"NODES = {NODES!r}\n{_CHILD}", *args]
    if counted:
        return instructions_of(command, env)
    subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return 0


Job = tuple[str, str, bool]
"""A figure: the peer, the node replayed ("-": none), whether execute takes calls as admitted."""


def per_step(src: str | None, job: Job, steps: int, path: str = "-") -> float:
    """Instructions a step costs, with the job's node replayed from ``path`` if it names one."""
    peer, node, admit = job
    mode = "replay" if node != "-" else "-"
    flags = [node, mode, path, "1" if admit else "0"]
    built = _child(src, [peer, "0", *flags])
    ran = _child(src, [peer, str(steps), *flags])
    return (ran - built) / steps


def _key(job: Job) -> str:
    peer, node, admit = job
    return peer + (f":{node}" if node != "-" else "") + (":admitted" if admit else "")


def measure(src: str | None, steps: int, workers: int = 2) -> dict[str, float]:
    """Every figure, keyed ``peer``, ``peer:node`` (that node replayed), ``:admitted``."""
    jobs: list[Job] = [("ours", "-", False), ("floor", "-", False), ("wide_floor", "-", False)]
    jobs += [("ours", n, False) for n in NODES] + [("floor", n, False) for n in FLOOR_NODES]
    jobs += [("ours", "all", False), ("floor", "all", False)]
    jobs += [("floor_channels", "-", False), ("floor_writes", "-", False)]
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for peer, node, admit in jobs:
            if node != "-":  # recorded once, uncounted
                paths[peer, node] = f"{tmp}/{peer}-{node}.pkl"
                flags = [node, "record", paths[peer, node], "1" if admit else "0"]
                _child(src, [peer, str(steps), *flags], counted=False)

        def figure(job: Job) -> tuple[str, float]:
            return _key(job), per_step(src, job, steps, paths.get((job[0], job[1]), "-"))

        with ThreadPoolExecutor(workers) as pool:
            return dict(pool.map(figure, jobs))


def report(figures: dict[str, float]) -> str:
    floor = figures["floor"]
    rows = [
        ["floor", f"{floor / 1e6:.2f}", "1.000", "-"],
        ["floor as wide as ours", f"{figures['wide_floor'] / 1e6:.2f}",
         f"{figures['wide_floor'] / floor:.3f}", "width: 14 writes, 4 routers"],
        ["ours", f"{figures['ours'] / 1e6:.2f}", f"{figures['ours'] / floor:.3f}", "-"],
    ]  # fmt: skip
    for node in NODES:
        body = figures["ours"] - figures[f"ours:{node}"]
        floors = figures["floor"] - figures[f"floor:{node}"] if node in FLOOR_NODES else 0.0
        rows.append(
            [f"  {node}'s body", f"{body / 1e6:.2f}", f"{body / floor:.3f}",
             f"floor's {floors / 1e6:.2f}: ours above it {(body - floors) / floor:.3f}x"]
        )  # fmt: skip
    header = ["part", "M instructions/step", "x floor", "note"]
    split = _table("Where a step's instructions go (memory saver, sync invoke)", header, rows)
    return f"{split}\n\n{frame(figures)}"


def frame(figures: dict[str, float]) -> str:
    """LangGraph's own share: both graphs with every node replayed, what a channel and a write
    cost it, and what that leaves the node bodies under 1.2x the floor."""
    floor, lg_floor, lg_ours = figures["floor"], figures["floor:all"], figures["ours:all"]
    channel = (figures["floor_channels"] - floor) / EXTRA
    write = (figures["floor_writes"] - figures["floor_channels"]) / EXTRA
    least = lg_ours + (floor - lg_floor)  # our graph, its bodies as cheap as the floor's
    rows = [
        ["floor, every node replayed", f"{lg_floor / 1e6:.2f}", f"{lg_floor / floor:.3f}",
         "LangGraph alone, five supersteps"],
        ["ours, every node replayed", f"{lg_ours / 1e6:.2f}", f"{lg_ours / floor:.3f}",
         f"LangGraph alone, our graph: {lg_ours / lg_floor:.2f}x the floor's"],
        ["a channel that holds a value", f"{channel / 1e6:.3f}", f"{channel / floor:.4f}",
         f"a step, read or not (floor + {EXTRA} channels)"],
        ["a write", f"{write / 1e6:.3f}", f"{write / floor:.4f}", "on top of its channel's"],
        ["ours, bodies as cheap as the floor's", f"{least / 1e6:.2f}", f"{least / floor:.3f}",
         "the least this graph costs"],
        ["left for our bodies at 1.2x", f"{(1.2 * floor - least) / 1e6:.2f}",
         f"{(1.2 * floor - least) / floor:.3f}",
         f"they cost {(figures['ours'] - least) / floor:.3f}x above the floor's"],
    ]  # fmt: skip
    header = ["part", "M instructions/step", "x floor", "note"]
    return _table("LangGraph's share, and what 1.2x the floor leaves", header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.attribution", description=__doc__)
    parser.add_argument("--head", help="the src folder to count (default: installed)")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    print(report(measure(args.head, args.steps)))


if __name__ == "__main__":
    main()
