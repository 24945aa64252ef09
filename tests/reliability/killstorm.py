"""The kill storm: runs SIGKILLed at random points (seeded) and resumed, many times over.

A run is killed inside a random node start of its script (as the node is ``entered`` or after
its body ``finished``, before LangGraph stores it), either at once or a few random milliseconds
after the process is let go (wherever that lands: a store write, the next node, the end). The
resume may be killed again. Two scripts take turns: the refund scenario (idempotent tools)
and a payout, whose ``send_refund`` is not idempotent, both under LangGraph's default
durability (the run's record, not the checkpoints, keeps a payment from running twice).
Tools write each call to a ledger file, so repeats are counted, not guessed.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langchain_core.tools import BaseTool, InjectedToolArg, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import build_graph, open_checkpointer, read, run
from gated_react.testing import call
from gated_react.tools._meta import idempotent
from gated_react.tools.support import SUPPORT_TOOLS

from ..support import procs, scenarios
from ..support.helpers import REFUND_GOAL

PAYOUT = [
    call("get_user_profile", user_id=42),
    call("get_user_billing", user_id=42),
    call("send_refund", user_id=42, amount_usd=49.0),
    call("note_refund", user_id=42),
    "Refunded USD 49.00 to the original payment method.",
]
UNSAFE = "send_refund"


def _ledger(path: str, tool_name: str, key: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, f"{tool_name} {key}\n".encode())  # one write: a kill cannot split it
    finally:
        os.close(fd)


def payout_tools(ledger: str) -> list[BaseTool]:
    """The support tools plus a payment that must never run twice and its ledger entry."""

    @tool
    def send_refund(
        user_id: int, amount_usd: float, idempotency_key: Annotated[str, InjectedToolArg] = ""
    ) -> str:
        """Send a refund to the user's card (a repeat would pay twice)."""
        _ledger(ledger, "send_refund", idempotency_key)
        return f"USD {amount_usd:.2f} sent to user {user_id}"

    @idempotent
    @tool
    def note_refund(user_id: int, idempotency_key: Annotated[str, InjectedToolArg] = "") -> str:
        """Note the refund in the books (safe to repeat: the key deduplicates it)."""
        _ledger(ledger, "note_refund", idempotency_key)
        return f"noted for user {user_id}"

    return [*SUPPORT_TOOLS, send_refund, note_refund]


def storm_graph(spec: dict[str, Any], saver: BaseCheckpointSaver[Any]) -> Any:
    if spec.get("script") != "payout":
        return scenarios.graph_for(spec, saver)
    model = scenarios.by_progress(PAYOUT)
    return build_graph(model, payout_tools(spec["ledger"]), checkpointer=saver)


def storm_child(spec: dict[str, Any]) -> None:
    """``procs.child`` with the storm's graphs (this runs in the child process only)."""
    procs.graph_for = storm_graph
    procs.child(spec)


# --- the uninterrupted runs ----------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    result: dict[str, Any]
    nodes: list[str]  # every node start, in order


def reference(script: str, folder: Path) -> Reference:
    spec = {"script": script, "ledger": str(folder / "reference.ledger")}
    nodes: list[str] = []
    graph = storm_graph(spec, InMemorySaver())
    result = run(graph, REFUND_GOAL, thread_id="ref", on_update=lambda n, _: nodes.append(n))
    return Reference(result, nodes)


def never_ran_then_again(trace: list[dict[str, Any]]) -> list[int]:
    """The trace entries of calls let through that never ran (not ok, no error, no stop, no
    human answer) whose call a later entry holds again (the same tool and arguments)."""
    found = []
    for i, entry in enumerate(trace):
        settled = entry["ok"] or entry.get("error") or entry.get("stop_reason")
        if settled or entry.get("by_human"):
            continue
        same = (entry["tool"], entry["args_hash"])
        if any((later["tool"], later["args_hash"]) == same for later in trace[i + 1 :]):
            found.append(i)
    return found


def without_entries(result: dict[str, Any], drop: list[int]) -> dict[str, Any]:
    """The result without those trace entries and their count in ``usage``."""
    gone = [result["trace"][i] for i in drop]
    usage = dict(result["usage"])
    per_tool = dict(usage["per_tool"])
    for entry in gone:
        per_tool[entry["tool"]] -= 1
    usage |= {"tool_calls": usage["tool_calls"] - len(gone), "per_tool": per_tool}
    trace = [entry for i, entry in enumerate(result["trace"]) if i not in drop]
    return {**result, "trace": trace, "usage": usage}


# --- one run of the storm ------------------------------------------------------------------


@dataclass
class Figures:
    runs: int = 0
    kills: int = 0
    resumes: int = 0
    finished_before_kill: int = 0
    same_as_uninterrupted: int = 0
    stopped_outcome_unknown: int = 0
    repeated_unsafe_calls: int = 0
    repeated_idempotent_calls: int = 0
    lost_runs: int = 0
    duplicated_steps: int = 0
    model_calls_again: int = 0
    """Model calls a kill cost (made, then lost with the process, made again on resume): the
    record counts each one it paid for, so the run's usage is above an uninterrupted run's."""
    traced_twice: int = 0
    """Runs whose trace also holds a call the killed process was let through and never ran,
    the step then asked of the model again (a new call id) and run. Such a call is neither
    traced nor counted (``spend.Tally.superseded``); before, one run in 30 held one."""
    killed_in: Counter[str] = field(default_factory=Counter)

    def line(self, store: str, seconds: float) -> str:
        shown = {k: v for k, v in vars(self).items() if k != "killed_in"}
        where = dict(sorted(self.killed_in.items()))
        return f"kill storm on {store}: {json.dumps(shown)} killed in {where} ({seconds:.1f} s)"


class Storm:
    """Runs the storm in ``folder`` against the store at ``url``."""

    def __init__(self, url: str, folder: Path, seed: int) -> None:
        self.url, self.folder, self.rng = url, folder, random.Random(seed)
        self.refs = {s: reference(s, folder) for s in ("refund", "payout")}
        self.figures = Figures()

    def point(self, nodes: list[str], go_on: str) -> dict[str, Any]:
        """A random place to stop: a node start of the run, a phase, now or a little later."""
        index = self.rng.randrange(len(nodes))
        node = nodes[index]
        block = {
            "node": node,
            "occurrence": nodes[: index + 1].count(node),
            "phase": self.rng.choice(["entered", "finished"]),
        }
        if self.rng.random() < 0.5:
            block["release"] = go_on
            block["delay"] = self.rng.uniform(0.0, 0.02)
        return block

    def one(self, kids: procs.Children, number: int) -> None:
        script = ("refund", "payout")[number % 2]
        ref, thread = self.refs[script], f"run-{number}"
        spec = {"script": script, "ledger": str(self.folder / f"{thread}.ledger")}
        op, nodes = "run", ref.nodes
        for attempt in range(4):
            block = self.point(nodes, kids.path(f"{thread}-{attempt}.go")) if attempt < 3 else None
            if attempt and block is not None and self.rng.random() < 0.6:
                block = None  # most resumes run to the end
            outcome = self.advance(
                kids, thread=thread, op=op, spec=spec, block=block, attempt=attempt
            )
            if outcome is not None:
                break
            op, nodes = "resume", ref.nodes[: max(1, len(ref.nodes) // 2)]
            self.figures.resumes += 1
        self.figures.runs += 1
        self.check(script, thread, spec, outcome)

    def advance(
        self,
        kids: procs.Children,
        *,
        thread: str,
        op: str,
        spec: dict[str, Any],
        block: dict[str, Any] | None,
        attempt: int,
    ) -> dict[str, Any] | None:
        """Start or resume; kill it at ``block``. The outcome, or None if it was killed."""
        if block is None:
            return kids.start(self.url, thread, op, **spec).outcome()
        marker = kids.path(f"{thread}-{attempt}.inside")
        delay = block.pop("delay", None)
        child = kids.start(self.url, thread, op, **spec, block={**block, "marker": marker})
        while not os.path.exists(marker) and child.alive():
            time.sleep(0.002)
        if not os.path.exists(marker):  # that node start never came in this process
            return child.outcome()
        if delay is not None:
            Path(block["release"]).touch()
            time.sleep(delay)
        child.proc.kill()
        child.proc.join(procs.WAIT)
        if child.proc.exitcode != -9:
            self.figures.finished_before_kill += 1
            return child.outcome()
        self.figures.kills += 1
        self.figures.killed_in[block["node"]] += 1
        return None

    def check(self, script: str, thread: str, spec: dict[str, Any], out: dict[str, Any]) -> None:
        """Record the run's figures; assertions come after the storm, on the totals."""
        ref = self.refs[script].result
        with open_checkpointer(self.url) as saver:
            stored = read(storm_graph(spec, saver), thread)
        mismatch = scenarios.comparable(out) != scenarios.comparable(stored)
        if "error" in out or "busy" in out or not out.get("status") or mismatch:
            self.figures.lost_runs += 1
            return
        again = scenarios.model_calls_again(out, ref)
        self.figures.model_calls_again += max(0, again)
        twice = never_ran_then_again(out["trace"])
        if twice:
            self.figures.traced_twice += 1
            out = without_entries(out, twice)
        steps = [h["step"] for h in out["history"]]
        traced = [t["step"] for t in out["trace"]]
        if steps != list(range(1, len(steps) + 1)) or len(set(traced)) != len(traced):
            self.figures.duplicated_steps += 1
        calls = scenarios.lines(Path(spec["ledger"]))
        unsafe = [c for c in calls if c.startswith(UNSAFE)]
        self.figures.repeated_unsafe_calls += max(0, len(unsafe) - 1)
        self.figures.repeated_idempotent_calls += max(0, len(calls) - len(unsafe) - 1)
        paid = len(unsafe) == 1 or script != "payout"
        if scenarios.as_run(out) == scenarios.as_run(ref) and paid and again >= 0:
            self.figures.same_as_uninterrupted += 1
        elif out["stop_reason"] == f"tool_outcome_unknown:{UNSAFE}" and (
            scenarios.without_ids(out["history"])
            == scenarios.without_ids(ref["history"])[: len(out["history"])]
        ):
            self.figures.stopped_outcome_unknown += 1
        else:
            self.figures.lost_runs += 1
