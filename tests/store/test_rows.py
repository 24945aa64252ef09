"""The rows a store keeps, as signing reads them: here, which thread a run record belongs to."""

from __future__ import annotations

from gated_react.store.rows import owners, record_body


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


def test_a_body_that_is_no_json_object_in_text_reads_as_empty() -> None:
    """As the ledger reads such a row (its signature then fails), so does every other reader:
    the key's re-signing among them, which would otherwise call a body stored as bytes valid."""
    assert record_body('{"call": "c1"}') == {"call": "c1"}
    assert record_body(b'{"call": "c1"}') == {}  # type: ignore[arg-type]
    assert record_body("[1, 2]") == record_body("not json") == {}
