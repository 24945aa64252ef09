"""The rows a store keeps, as signing reads them: here, which thread a run record belongs to."""

from __future__ import annotations

import pytest

from gated_react.store.rows import owners, record_body, record_thread, thread_of

IDS = ["a", "a|b", "a|", "|a", "||", "a||b", "|", "", "ä|ö", "a\\|b"]


@pytest.mark.parametrize("thread", IDS)
@pytest.mark.parametrize("namespace", ["", "agent", "outer|agent"])
def test_a_record_thread_names_one_thread_whatever_its_id_holds(
    thread: str, namespace: str
) -> None:
    """A thread id may hold ``|``, the separator of a subgraph's namespace: doubled, it never
    names another thread's subgraph."""
    kept = record_thread(thread, namespace)
    assert thread_of(kept) == thread
    others = {record_thread(other, ns) for other in IDS for ns in ("", "agent", "outer|agent")}
    assert len(others) == len(IDS) * 3  # no two (thread, namespace) share a record thread


def test_a_thread_named_like_a_subgraph_is_its_own() -> None:
    """Thread ``a``'s subgraph ``agent`` and a thread named ``a|agent``: two record threads.
    Before, both were ``a|agent``: the thread counted the subgraph's records, and deleting it
    deleted them."""
    assert record_thread("a", "agent") == "a|agent"
    assert record_thread("a|agent") == "a||agent"
    found = owners(
        ["a", "a|b"],
        ["a", "a|agent:1", "a|agent:1|inner:2", "a||b", "a||b|agent:3", "gone|agent:4"],
    )
    assert found == {
        "a": ["a", "a|agent:1", "a|agent:1|inner:2"],
        "a|b": ["a||b", "a||b|agent:3"],
        "gone": ["gone|agent:4"],  # no thread holds it any more: its own thread's still
    }


def test_a_body_that_is_no_json_object_in_text_reads_as_empty() -> None:
    """As the ledger reads such a row (its signature then fails), so does every other reader:
    the key's re-signing among them, which would otherwise call a body stored as bytes valid."""
    assert record_body('{"call": "c1"}') == {"call": "c1"}
    assert record_body(b'{"call": "c1"}') == {}  # type: ignore[arg-type]
    assert record_body("[1, 2]") == record_body("not json") == {}
