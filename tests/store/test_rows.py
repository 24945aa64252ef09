"""The rows a store keeps, as signing reads them: here, which thread a run record belongs to."""

from __future__ import annotations

from gated_react.store.rows import owners


def test_a_subgraphs_records_belong_to_the_longest_thread_that_starts_them() -> None:
    """A graph run as a subgraph keeps its records under ``<thread>|<namespace>`` (nested
    namespaces hold ``|`` too), and a thread id may hold ``|`` itself: each record thread goes
    to the one thread it is a part of, never to two."""
    found = owners(
        ["a", "a|b"],
        ["a", "a|agent:1", "a|agent:1|inner:2", "a|b", "a|b|agent:3", "gone|agent:4"],
    )
    assert found == {
        "a": ["a", "a|agent:1", "a|agent:1|inner:2"],
        "a|b": ["a|b", "a|b|agent:3"],
        "gone|agent:4": ["gone|agent:4"],  # no thread holds it: its own
    }
