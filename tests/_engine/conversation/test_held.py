"""A value is kept exactly while its message lives, and only for that very message."""

import gc

from langchain_core.messages import HumanMessage

from gated_react._engine.conversation.held import Held


def test_a_value_goes_with_its_message() -> None:
    table: Held[int, str] = Held()
    message = HumanMessage("q")
    table.put(1, message, "kept")
    assert table.get(1) == (message, "kept")
    assert table.get(1, message) == (message, "kept")
    assert table.get(1, HumanMessage("q")) is None  # an equal message is not that message
    del message
    gc.collect()
    assert (table.get(1), len(table)) == (None, 0)


def test_a_newer_entry_is_not_dropped_by_the_older_messages_end() -> None:
    table: Held[str, int] = Held()
    old, new = HumanMessage("a"), HumanMessage("b")
    table.put("k", old, 1)
    table.put("k", new, 2)
    del old
    gc.collect()
    assert table.get("k") == (new, 2)
