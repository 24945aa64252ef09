from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass

from pydantic import BaseModel

from gated_react.toolcall import backoff, to_observation


def test_a_hung_tool_does_not_keep_the_process_alive() -> None:
    script = textwrap.dedent(
        """
        import time
        from langchain_core.tools import tool
        from gated_react.toolcall import ToolTimeout, invoke

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
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
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
