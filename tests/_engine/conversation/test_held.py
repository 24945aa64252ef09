"""A value is kept exactly while its message lives, and only for that very message."""

import gc
import threading

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


def test_a_message_collected_while_the_table_is_locked_is_forgotten_without_a_deadlock() -> None:
    """Before: a kept message freed while the table was locked (the collector runs at any
    allocation, ``put``'s included) called back into the same lock on the same thread: the run
    hung for good (seen once in a full test run). The lock is reentrant now."""
    held: Held[str, int] = Held()
    box = [HumanMessage("gone soon")]
    held.put("k", box[0], 1)
    finished = threading.Event()

    def free_while_locked() -> None:
        with held._lock:  # as put holds it when the collector runs
            box.clear()  # the last reference: the message goes, and its callback runs now
        finished.set()

    threading.Thread(target=free_while_locked, daemon=True).start()
    assert finished.wait(10)
    assert len(held) == 0
