from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap
import time
import weakref
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.tools import tool
from pydantic import BaseModel

from gated_react import build_graph
from gated_react._engine.execution.tool_runner import ainvoke, backoff, cut, invoke, to_observation
from gated_react.testing import ScriptedChatModel

from ...support.reaping import PATIENCE


def test_a_hung_tool_does_not_keep_the_process_alive() -> None:
    script = textwrap.dedent(
        """
        import time
        from langchain_core.tools import tool
        from gated_react._engine.execution.tool_runner import ToolTimeout, invoke

        @tool
        def hang() -> str:
            '''Never returns.'''
            time.sleep(3600)
            return "never"

        try:
            invoke(hang, {}, {}, timeout=0.2, retries=0)
        except ToolTimeout:
            print("timed out")
        """
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.stdout.strip() == "timed out", done.stderr
    assert time.monotonic() - started < 30


def test_observations_are_json_and_bounded() -> None:
    @dataclass
    class Point:
        x: int

    class Model(BaseModel):
        y: int

    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    assert to_observation({"p": Point(1), "m": Model(y=2), "s": {3}, "b": b"xyz"}, 1000) == {
        "p": {"x": 1},
        "m": {"y": 2},
        "s": [3],
        "b": "<3 bytes>",
    }
    assert to_observation(Opaque(), 1000) == "<opaque>"
    loop: list[object] = []
    loop.append(loop)
    assert isinstance(to_observation(loop, 1000), str)
    big = to_observation({"rows": ["x" * 100] * 10_000}, 500)
    assert isinstance(big, str)
    assert big.endswith("first 500 shown]")


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    first = [backoff(1) for _ in range(50)]
    assert all(0.05 <= d <= 0.1 for d in first)
    assert len(set(first)) > 1
    assert backoff(30) <= 5.0


def test_observations_survive_hostile_return_values() -> None:
    class BadRepr:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    assert to_observation(BadRepr(), 1000) == "<BadRepr object that cannot be shown>"
    assert to_observation(deep, 1000) == "<list object that cannot be shown>"
    assert to_observation(10**5000, 1000) == "<int object that cannot be shown>"
    assert (
        to_observation({"n": 2**100}, 1000) == f'{{"n": {2**100}}}'
    )  # text: msgpack holds 64 bits
    assert to_observation(["a\ud800"], 1000) == ["a\ufffd"]
    assert to_observation({"env": "KEY=opaque-key-0123"}, 1000, ("opaque-key-0123",)) == {
        "env": "KEY=***"
    }


class Shout(str):
    """A str subclass, as some tools return (LangChain's message text is one)."""


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("KEY=opaque-key-0123 " + "x" * 1000, "KEY=*** " + "x" * 1000),
        ("caf\u00e9 \ud800 \U0001f600 opaque-key-0123", "caf\u00e9 \ufffd \U0001f600 ***"),
        (Shout("a\udfff opaque-key-0123"), "a\ufffd ***"),
        ("", ""),
    ],
)
def test_a_text_result_is_stored_as_plain_cleaned_text(value: str, shown: str) -> None:
    out = to_observation(value, 5000, ("opaque-key-0123",))
    assert out == shown
    assert type(out) is str  # never the tool's subclass: no store could load it back
    assert to_observation(value, 10, ("opaque-key-0123",)) == cut(shown, 10)


class Marker:
    """Stands for what a run's config carries (callbacks, the graph's channels)."""


@tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_idle_worker_keeps_nothing_of_the_call_it_ran(mode: str) -> None:
    # Idle tool threads live for a minute; the finished call's config must not live with them.
    marker = Marker()
    config = {"configurable": {"marker": marker}}
    if mode == "sync":
        assert invoke(echo, {"text": "hi"}, config, timeout=5, retries=0) == "hi"  # type: ignore[arg-type]
    else:
        call = ainvoke(echo, {"text": "hi"}, config, timeout=5, retries=0)  # type: ignore[arg-type]
        assert asyncio.run(call) == "hi"
    gone = weakref.ref(marker)
    del marker, config
    for _ in range(100):  # the worker drops the call right after waking the caller
        gc.collect()
        if gone() is None:
            break
        time.sleep(0.05)
    assert gone() is None, "an idle tool thread still holds the last call's config"


BOOKED: list[str] = []


@tool
def book_flight(dest: str) -> str:
    """Book a flight once the user confirms."""
    from langgraph.types import interrupt

    answer = interrupt({"question": f"Book a flight to {dest}?"})
    BOOKED.append(dest)
    return f"booked to {dest}" if answer == "yes" else "cancelled"


@tool
async def abook_flight(dest: str) -> str:
    """The same, async."""
    from langgraph.types import interrupt

    answer = interrupt({"question": f"Book a flight to {dest}?"})
    BOOKED.append(dest)
    return f"booked to {dest}" if answer == "yes" else "cancelled"


@pytest.mark.parametrize(
    ("flight", "use_async"),
    [(book_flight, False), (book_flight, True), (abook_flight, True)],
    ids=["sync", "sync-tool-ainvoke", "async"],
)
def test_interrupt_in_a_tool_is_refused_with_the_way_to_ask_instead(
    flight: Any, use_async: bool
) -> None:
    """Refused, not paused: a resume could not be told from a crash, so a tool that is not
    idempotent could run twice (docs/guides/chat.md says why). Before, a failure that quoted
    ``GraphInterrupt``'s repr and named no way out."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from gated_react.testing import call

    BOOKED.clear()
    model = ScriptedChatModel(replies=[call(flight.name, dest="Rome"), "Booked."])
    graph = build_graph(model, [flight], checkpointer=InMemorySaver())
    thread: RunnableConfig = {"configurable": {"thread_id": f"t-{flight.name}-{use_async}"}}
    given = {"goal": "book Rome"}
    out = asyncio.run(graph.ainvoke(given, thread)) if use_async else graph.invoke(given, thread)
    assert "__interrupt__" not in out
    assert out["stop_reason"] == f"tool_error:{flight.name}"
    assert "called interrupt()" in out["message"]
    assert f"Policy(require_approval={{'{flight.name}'}})" in out["message"]
    assert graph.invoke(Command(resume="yes"), thread)["stop_reason"] == out["stop_reason"]
    assert BOOKED == []
