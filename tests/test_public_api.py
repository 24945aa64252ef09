"""The public API: exactly these names, sorted, importable from the package root."""

from __future__ import annotations

import gated_react

PUBLIC = [
    "Budget",
    "NotWaiting",
    "Policy",
    "RunInput",
    "RunResult",
    "State",
    "Stop",
    "StopReason",
    "StoreError",
    "ThreadBusy",
    "ThreadExists",
    "UnknownThread",
    "aopen_checkpointer",
    "aresume",
    "arun",
    "build_graph",
    "open_checkpointer",
    "read",
    "resume",
    "run",
]


def test_all_is_sorted_and_exactly_the_public_api() -> None:
    assert gated_react.__all__ == sorted(gated_react.__all__)
    assert gated_react.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(gated_react, name).__module__.startswith("gated_react.")
