"""Real processes for durability tests: children that run or resume a thread and can be stopped
inside any node, so a test can SIGKILL them there.

"Inside a node" is made deterministic from test code only: a LangChain callback handler sees
the node's run start (``entered``) or its body and router finish before LangGraph stores the
node's writes (``finished``), waits until the checkpoint before the node is stored, writes a
marker file and then sleeps until it is killed (or, with ``hold``, until a release file
appears). Nothing in ``gated_react`` knows about it.

Children are forked from a forkserver that imported this module once, so a child starts in
milliseconds instead of paying the imports again; each is still its own OS process with its
own store connections.
"""

from __future__ import annotations

import asyncio
import functools
import json
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.base import BaseCheckpointSaver

from gated_react import (
    ThreadBusy,
    aopen_checkpointer,
    aresume,
    arun,
    open_checkpointer,
    resume,
    run,
)

from .helpers import REFUND_GOAL
from .reaping import PATIENCE
from .scenarios import graph_for

WAIT = PATIENCE  # seconds a test waits for a child before it gives up (never reached when healthy)


# --- stopping inside a node ----------------------------------------------------------------


class NodeWatch(BaseCallbackHandler):
    """Counts the starts of one node in this process; ``hit`` is true on the chosen one."""

    def __init__(self, node: str, occurrence: int) -> None:
        self.node, self.occurrence, self.seen = node, occurrence, 0

    def hit(self, metadata: dict[str, Any] | None, name: str | None) -> bool:
        if name != self.node or (metadata or {}).get("langgraph_node") != self.node:
            return False
        self.seen += 1
        return self.seen == self.occurrence


class Blocker(NodeWatch):
    """Stops the process inside ``node`` (its ``occurrence``-th run in this process)."""

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        *,
        node: str,
        marker: str,
        phase: str = "entered",
        occurrence: int = 1,
        release: str | None = None,
    ) -> None:
        super().__init__(node, occurrence)
        self.saver, self.phase, self.marker, self.release = saver, phase, marker, release
        self.runs: dict[UUID, tuple[str, int]] = {}

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self.hit(metadata, kwargs.get("name")):
            return
        meta = metadata or {}
        where = (str(meta.get("thread_id")), int(meta["langgraph_step"]))
        if self.phase == "entered":
            self.stop(*where)
        self.runs[run_id] = where

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if self.phase == "finished" and run_id in self.runs:
            self.stop(*self.runs[run_id])

    def stop(self, thread_id: str, step: int) -> None:
        # "Inside node N" means every node before it is stored, whatever the durability mode.
        config: Any = {"configurable": {"thread_id": thread_id}}
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            stored = self.saver.get_tuple(config)
            if stored is not None and stored.metadata.get("step", -2) >= step - 1:
                break
            time.sleep(0.005)
        touch(self.marker)
        while self.release is None or not os.path.exists(self.release):
            time.sleep(0.01)


def with_blocker(graph: Any, spec: dict[str, Any], saver: BaseCheckpointSaver[Any]) -> Any:
    """The graph, stopping inside the node ``spec["block"]`` names (if any)."""
    if not spec.get("block"):
        return graph
    return graph.with_config(callbacks=[Blocker(saver, **spec["block"])])


def _calls(step: Any) -> list[dict[str, Any]]:
    """The calls of the step in hand, as the ``step`` channel holds them (plain JSON)."""
    return list((step or {}).get("calls") or []) if isinstance(step, dict) else []


def slow_gate_checkpoints(saver: BaseCheckpointSaver[Any], marker: str) -> None:
    """Make the store hang on the checkpoint that records the gate's approved call."""
    put = saver.put

    def hanging(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        calls = _calls(checkpoint["channel_values"].get("step"))
        if "branch:to:execute" in new_versions and calls and not calls[0].get("outcome"):
            touch(marker)
            hang()
        return put(config, checkpoint, metadata, new_versions)

    saver.put = hanging  # type: ignore[method-assign]


def hang_after_the_outcome(saver: BaseCheckpointSaver[Any], marker: str) -> None:
    """Let the store save execute's writes (the outcome) as pending writes, but hang the
    checkpoint that would include them: the process dies between the two."""
    put, put_writes = saver.put, saver.put_writes
    saved = threading.Event()

    def writes(config: Any, items: Any, task_id: str, task_path: str = "") -> None:
        put_writes(config, items, task_id, task_path)
        done = [calls for channel, value in items if channel == "step" for calls in [_calls(value)]]
        if any(calls and calls[0].get("outcome") for calls in done):
            saved.set()

    def checkpoint(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        calls = _calls(checkpoint["channel_values"].get("step"))
        if calls and calls[0].get("outcome"):
            saved.wait()
            touch(marker)
            hang()
        return put(config, checkpoint, metadata, new_versions)

    saver.put_writes = writes  # type: ignore[method-assign]
    saver.put = checkpoint  # type: ignore[method-assign]


def hang() -> None:
    while True:
        time.sleep(1)


def touch(path: str) -> None:
    Path(path).write_text(str(os.getpid()))


# --- the child process ---------------------------------------------------------------------


def child(spec: dict[str, Any]) -> None:
    """Run or resume one thread as ``spec`` says (``"mode": "async"`` for the async API);
    write the result, ``busy`` or ``error`` as JSON."""
    log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    if spec.get("go"):
        while not os.path.exists(spec["go"]):
            time.sleep(0.002)
    try:
        out = asyncio.run(_aadvance(spec)) if spec.get("mode") == "async" else _advance(spec)
    except ThreadBusy as exc:
        out = {"busy": str(exc)}
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"}
    tmp = spec["out"] + ".tmp"
    Path(tmp).write_text(json.dumps(out, default=_message))
    os.replace(tmp, spec["out"])


def _advance(spec: dict[str, Any]) -> dict[str, Any]:
    with open_checkpointer(spec["url"]) as saver:
        if spec.get("slow_put"):
            slow_gate_checkpoints(saver, spec["slow_put"])
        if spec.get("hang_after_outcome"):
            hang_after_the_outcome(saver, spec["hang_after_outcome"])
        graph = with_blocker(graph_for(spec, saver), spec, saver)
        if spec["op"] == "run":
            return run(graph, spec.get("goal", REFUND_GOAL), thread_id=spec["thread"])
        if "answer" in spec:
            return resume(graph, spec["thread"], spec["answer"])
        return resume(graph, spec["thread"])


async def _aadvance(spec: dict[str, Any]) -> dict[str, Any]:
    async with aopen_checkpointer(spec["url"]) as saver:
        graph = with_blocker(graph_for(spec, saver), spec, saver)
        if spec["op"] == "run":
            return await arun(graph, spec.get("goal", REFUND_GOAL), thread_id=spec["thread"])
        if "answer" in spec:
            return await aresume(graph, spec["thread"], spec["answer"])
        return await aresume(graph, spec["thread"])


@functools.cache
def context() -> ForkServerContext:
    """A forkserver that has imported this module (and so gated_react, LangGraph, psycopg)."""
    made = multiprocessing.get_context("forkserver")
    made.set_forkserver_preload([__name__, "psycopg", "langgraph.checkpoint.postgres"])
    return made


class Children:
    """Starts children in a work folder, waits for their markers and results, kills them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.procs: list[BaseProcess] = []
        self.count = 0

    def start(self, url: str, thread: str, op: str, **spec: Any) -> Child:
        self.count += 1
        name = f"{op}-{self.count}"
        full = {
            "url": url,
            "thread": thread,
            "op": op,
            "out": str(self.folder / f"{name}.json"),
            "log": str(self.folder / f"{name}.log"),
            **spec,
        }
        proc = context().Process(target=child, args=(full,), name=name)
        proc.start()
        self.procs.append(proc)
        return Child(proc, full)

    def path(self, name: str) -> str:
        return str(self.folder / name)

    def close(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
            proc.join(WAIT)


@contextmanager
def children(folder: Path) -> Iterator[Children]:
    made = Children(folder)
    try:
        yield made
    finally:
        made.close()


class Child:
    """One started child."""

    def __init__(self, proc: BaseProcess, spec: dict[str, Any]) -> None:
        self.proc, self.spec = proc, spec

    def wait_for(self, marker: str) -> None:
        """Until the child wrote ``marker``; fails if it ended first."""
        deadline = time.monotonic() + WAIT
        while not os.path.exists(marker):
            if not self.proc.is_alive():
                raise AssertionError(f"child ended before {marker}: {self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {marker} after {WAIT:g} s: {self.log()}")
            time.sleep(0.005)

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would do: no cleanup runs in the child."""
        self.proc.kill()
        self.proc.join(WAIT)
        assert self.proc.exitcode == -9

    def wait_until(self, condition: Callable[[], bool]) -> None:
        """Until ``condition()`` holds; fails if the child ended first."""
        deadline = time.monotonic() + WAIT
        for pause in polls():
            if condition():
                return
            if not self.proc.is_alive() or time.monotonic() > deadline:
                raise AssertionError(f"condition not met: {self.log()}")
            time.sleep(pause)

    def alive(self) -> bool:
        return self.proc.is_alive()

    def outcome(self) -> dict[str, Any]:
        """The child's JSON output after it exits on its own: a result, ``busy`` or ``error``."""
        self.proc.join(WAIT)
        assert self.proc.exitcode == 0, self.log()
        out: dict[str, Any] = json.loads(Path(self.spec["out"]).read_text())
        return out

    def result(self) -> dict[str, Any]:
        """The child's result; fails on ``busy`` or ``error``."""
        out = self.outcome()
        assert "error" not in out, out
        assert "busy" not in out, out
        return out

    def log(self) -> str:
        path = Path(self.spec["log"])
        return path.read_text()[-3000:] if path.exists() else "(no log)"


def polls() -> Iterator[float]:
    """Pauses between checks: 5 ms at first, growing to 0.1 s. Many conditions open a database
    connection per check (a Postgres backend forked each time): at a steady 5 ms, a long wait
    took most of a core from the workers it waited on, and a loaded run missed heartbeats."""
    pause = 0.005
    while True:
        yield pause
        pause = min(pause * 1.5, 0.1)


def wait_until(condition: Callable[[], bool]) -> None:
    """Until ``condition()`` holds (at most ``WAIT`` seconds)."""
    deadline = time.monotonic() + WAIT
    for pause in polls():
        if condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {WAIT:g} s")
        time.sleep(pause)


def open_store(url: str, go: str) -> None:
    """Open (and so set up) the store as soon as ``go`` exists; exit 0 on success."""
    while not os.path.exists(go):
        time.sleep(0.001)
    with open_checkpointer(url):
        pass


def _message(value: Any) -> dict[str, Any]:
    """A chat message of the result as JSON: its type and content (``comparable`` reads them)."""
    return {"type": value.type, "content": value.content}
