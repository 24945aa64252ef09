"""The public API: exactly these names, sorted, importable from the package root."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gated_react

from .support.reaping import PATIENCE

PUBLIC = [
    "ArgumentRefused",
    "Budget",
    "GatedReactError",
    "MiddlewareRefused",
    "MisroutedStep",
    "NotWaiting",
    "Policy",
    "Price",
    "Question",
    "RunInput",
    "RunInputDict",
    "RunResult",
    "State",
    "Stop",
    "StopReason",
    "StoreError",
    "ThreadBusy",
    "ThreadExists",
    "ThreadResult",
    "UnknownThread",
    "UnknownToolName",
    "UnpricedModel",
    "UnsafeCheckpoint",
    "UnsupportedModel",
    "aopen_checkpointer",
    "aread",
    "aresult_of",
    "aresume",
    "arun",
    "as_tool",
    "build_graph",
    "naming_inputs",
    "open_checkpointer",
    "read",
    "result_of",
    "resume",
    "run",
    "with_input_ids",
]


def test_all_is_sorted_and_exactly_the_public_api() -> None:
    assert gated_react.__all__ == sorted(gated_react.__all__)
    assert gated_react.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(gated_react, name).__module__.startswith("gated_react.")


def test_names_load_on_first_use() -> None:
    """``import gated_react`` stays light: LangGraph loads only when a name needs it."""
    code = (
        "import sys, gated_react\n"
        "before = 'langgraph.graph' in sys.modules\n"
        "gated_react.build_graph\n"
        "print(before, 'langgraph.graph' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=PATIENCE
    )
    assert done.stdout.split() == ["False", "True"]


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        gated_react.no_such_name  # noqa: B018
    assert set(PUBLIC) <= set(dir(gated_react))
