"""Tool fault injection: tools that raise, hang, return 10 MB or values JSON cannot hold.

Sync and async tools, under ``invoke`` and ``ainvoke``, each run on a real SQLite store: the run
ends with the stop reason its policy names, what is stored is what was returned to the caller,
and nothing a tool returns makes the run raise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool, StructuredTool

from gated_react import Policy, aopen_checkpointer, build_graph, open_checkpointer, read
from gated_react.testing import ScriptedChatModel, call

from ..support.reaping import PATIENCE
from ..support.results import ainvoked, aread, invoked
from . import tally
from .kit import check_stop_reason

LIMIT = 4000  # Policy.max_observation_chars, the default
MARKER_ROOM = 60  # " ...[cut: 10000002 chars, first 4000 shown]"

REPO = Path(__file__).resolve().parents[2]  # the child runs ``-m tests.reliability...``


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot print")


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("cannot repr")


@dataclasses.dataclass
class Point:
    x: float
    y: float


def _cycle_list() -> Any:
    items: list[Any] = [1]
    items.append(items)
    return items


def _cycle_dict() -> Any:
    node: dict[str, Any] = {"name": "a"}
    node["self"] = node
    return node


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def _raise(exc: BaseException) -> Callable[[], Any]:
    def fail() -> Any:
        raise exc

    return fail


RETURNS: dict[str, Callable[[], Any]] = {
    "10 MB string": lambda: "x" * 10_000_000,
    "10 MB of rows": lambda: [{"id": i, "text": "y" * 90} for i in range(100_000)],
    "set and bytes": lambda: {"tags": {"b", "a"}, "blob": b"\x00\xff" * 10},
    "opaque object": object,
    "dataclass": lambda: Point(1.0, 2.0),
    "cyclic list": _cycle_list,
    "cyclic dict": _cycle_dict,
    "nested 300": lambda: _nested(300),
    "nested 5000": lambda: _nested(5000),
    "2 ** 100": lambda: {"result": 2**100},
    "10 ** 5000": lambda: 10**5000,
    "broken repr": BadRepr,
    "lone surrogates": lambda: {"text\ud800": "a\udfffb"},
    "nan and inf": lambda: {"a": math.nan, "b": -math.inf},
    "generator": lambda: (i for i in range(3)),
    "none": lambda: None,
}
RAISES: dict[str, Callable[[], Any]] = {
    "ValueError": _raise(ValueError("bad input")),
    "unprintable error": _raise(Unprintable()),
    "error with a password": _raise(ConnectionError("postgresql://app:hunter2@db/x refused")),
    "huge error message": _raise(RuntimeError("e" * 5_000_000)),
}


def fetch_tool(make: Callable[[], Any], *, asynchronous: bool) -> BaseTool:
    if asynchronous:

        async def fetch_async() -> Any:
            await asyncio.sleep(0)
            return make()

        return StructuredTool.from_function(
            coroutine=fetch_async, name="fetch", description="Fetch the data."
        )

    def fetch() -> Any:
        return make()

    return StructuredTool.from_function(func=fetch, name="fetch", description="Fetch the data.")


def run_on_sqlite(
    path: Path, tool: BaseTool, policy: Policy, use_async: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's result (as ``run`` gives it) and the thread read back from the store."""
    model = ScriptedChatModel(replies=[call("fetch"), "done"])
    config: Any = {"configurable": {"thread_id": "faults"}}

    async def arun() -> tuple[dict[str, Any], dict[str, Any]]:
        async with aopen_checkpointer(str(path)) as saver:
            graph = build_graph(model, [tool], policy=policy, checkpointer=saver)
            out = await ainvoked(graph, {"goal": "fetch it"}, config)
            return dict(out), dict(await aread(graph, "faults"))

    if use_async:
        return asyncio.run(arun())
    with open_checkpointer(str(path)) as saver:
        graph = build_graph(model, [tool], policy=policy, checkpointer=saver)
        out = invoked(graph, {"goal": "fetch it"}, config)
        return dict(out), dict(read(graph, "faults"))


MODES = [
    pytest.param(False, False, id="sync-tool-invoke"),
    pytest.param(False, True, id="sync-tool-ainvoke"),
    pytest.param(True, True, id="async-tool-ainvoke"),
]


@pytest.mark.parametrize(("asynchronous", "use_async"), MODES)
@pytest.mark.parametrize("case", list(RETURNS))
def test_whatever_a_tool_returns_is_stored_as_bounded_json(
    tmp_path: Path, case: str, asynchronous: bool, use_async: bool
) -> None:
    tool = fetch_tool(RETURNS[case], asynchronous=asynchronous)
    out, stored = run_on_sqlite(tmp_path / "runs.sqlite", tool, Policy(), use_async)
    assert out["stop_reason"] == "success", out["message"]
    observation = out["history"][0]["observation"]
    text = observation if isinstance(observation, str) else json.dumps(observation)
    assert len(text) <= LIMIT + MARKER_ROOM
    json.dumps(observation, allow_nan=False, ensure_ascii=False).encode("utf-8")
    assert stored["history"] == out["history"]  # the store holds what the caller got
    assert stored["stop_reason"] == "success"
    assert (tmp_path / "runs.sqlite").stat().st_size < 2_000_000  # the 10 MB never reach disk
    tally.count("fault runs: hostile return values")


@pytest.mark.parametrize(("asynchronous", "use_async"), MODES)
@pytest.mark.parametrize("case", list(RAISES))
@pytest.mark.parametrize("on_error", ["stop", "observe"])
def test_a_raising_tool_stops_or_is_observed_as_the_policy_says(
    tmp_path: Path, case: str, asynchronous: bool, use_async: bool, on_error: str
) -> None:
    tool = fetch_tool(RAISES[case], asynchronous=asynchronous)
    policy = Policy(on_tool_error=on_error)  # type: ignore[arg-type]
    out, stored = run_on_sqlite(tmp_path / "runs.sqlite", tool, policy, use_async)
    if on_error == "stop":
        assert out["stop_reason"] == "tool_error:fetch"
        assert out["trace"][-1]["stop_reason"] == "tool_error:fetch"
        shown = out["message"]
    else:
        assert out["stop_reason"] == "success"
        assert out["trace"][0]["error"] == "tool_error:fetch"
        shown = out["history"][0]["observation"]
    assert shown.startswith("fetch failed: ")
    assert "\n" not in shown
    assert len(shown) <= 600
    assert "hunter2" not in json.dumps(out, default=str)
    assert stored["stop_reason"] == out["stop_reason"]
    tally.count("fault runs: raising tools")


def test_an_async_only_tool_runs_under_sync_invoke_too(tmp_path: Path) -> None:
    tool = fetch_tool(lambda: "data", asynchronous=True)
    out, _ = run_on_sqlite(tmp_path / "runs.sqlite", tool, Policy(), use_async=False)
    assert out["stop_reason"] == "success"
    assert out["history"][0]["observation"] == "data"


def test_hung_tools_time_out_and_never_keep_the_process_alive(tmp_path: Path) -> None:
    """Sync tools that never return (under invoke and ainvoke) and an async one, each past a
    0.2 s timeout, in a child process that must then exit by itself: a non-daemon thread or
    an un-cancelled task left behind would keep it running until the ceiling kills it."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.hung_tools", str(tmp_path / "runs.sqlite")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = {row["case"]: row for row in map(json.loads, done.stdout.splitlines())}
    assert set(results) == {
        "sync tool, invoke, stop",
        "sync tool, invoke, observe",
        "sync tool, ainvoke, stop",
        "async tool, ainvoke, stop",
        "async tool, ainvoke, observe",
    }
    for case, row in results.items():
        check_stop_reason(row["stop_reason"], frozenset({"hang"}))
        if case.endswith("stop"):
            assert row["stop_reason"] == "tool_timeout:hang"
            said = "hang did not return within 0.2 s"
            # a thread cannot be stopped: the stop says so (an awaited call is cancelled)
            runs_on = "; it runs on in its thread" if case.startswith("sync") else ""
            assert row["message"].startswith(said + runs_on)
            assert ("may still finish" in row["message"]) == bool(runs_on)
        else:  # observed: the model read the timeout and answered
            assert row["stop_reason"] == "success"
            assert row["trace_errors"] == ["tool_timeout:hang"]
        assert row["stored"] == row["stop_reason"]
    tally.count("fault runs: hung tools (child process)", len(results))
