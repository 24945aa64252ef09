"""Records and their signatures: a record verifies only under the key that signed it, and only
as it was signed (every field is covered); without a store key, under a key only this process
holds, which a process that continues the thread after a crash does not have."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gated_react._engine.authority.ledger import ledger_for
from gated_react._engine.authority.records import Kind, Record, process_key
from gated_react.store.checkpointer import open_checkpointer
from gated_react.store.key import StoreKey, record_text

from ...support.helpers import as_another_process

KEY, OLD, OTHER = "k" * 32, "o" * 32, "x" * 32
PERMIT = Record(
    "t1", "q-1", Kind.PERMIT, "key-1", {"call": "c1", "tool": "pay", "args": '{"a":5}'}, at=1e9
)


def test_a_record_verifies_under_the_key_that_signed_it_and_no_other() -> None:
    signed = PERMIT.signed(StoreKey(KEY))
    assert signed.verified
    assert signed.mac
    assert signed.holds(StoreKey(KEY))
    assert not signed.holds(StoreKey(OTHER))
    assert not signed.holds(process_key())
    assert not PERMIT.holds(StoreKey(KEY))  # never signed


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("thread", "t2"),
        ("run", "q-2"),
        ("kind", Kind.DONE),
        ("key", "key-2"),
        ("body", {"call": "c1", "tool": "pay", "args": '{"a":500}'}),
        ("body", {"call": "c1", "tool": "pay", "args": '{"a":5}', "rule": "allow"}),
        ("at", PERMIT.at + 1),
    ],
    ids=["thread", "run", "kind", "key", "args", "a-field-more", "at"],
)
def test_a_change_to_any_field_breaks_the_signature(field: str, value: Any) -> None:
    key = StoreKey(KEY)
    changed = dataclasses.replace(PERMIT.signed(key), **{field: value})
    assert not _read_back(changed).holds(key)


def _read_back(record: Record) -> Record:
    """``record`` as a reader gets it from its row: the body read from the text stored."""
    return dataclasses.replace(record, text=record_text(record.body))


def test_a_record_stored_with_its_keys_in_another_order_still_verifies() -> None:
    """Rows written before the text was stored sorted hold the body in the order it was made."""
    key = StoreKey(KEY)
    signed = PERMIT.signed(key)
    unsorted = json.dumps(dict(reversed(list(PERMIT.body.items()))), separators=(",", ":"))
    assert unsorted != signed.text
    assert dataclasses.replace(signed, text=unsorted).holds(key)


def test_what_the_ledger_adds_is_not_signed() -> None:
    """The store's sequence number is the backend's to give; it is not part of the digest."""
    key = StoreKey(KEY)
    assert dataclasses.replace(PERMIT.signed(key), seq=42).holds(key)


def test_the_body_is_signed_as_json_whatever_the_order_of_its_keys() -> None:
    key = StoreKey(KEY)
    body = dict(reversed(list(PERMIT.body.items())))
    assert list(body) != list(PERMIT.body)
    assert dataclasses.replace(PERMIT.signed(key), body=body).holds(key)


def test_keys_rotate_the_first_signs_and_an_older_still_verifies() -> None:
    by_old = PERMIT.signed(StoreKey(OLD))
    assert by_old.holds(StoreKey([KEY, OLD]))
    by_both = PERMIT.signed(StoreKey([KEY, OLD]))
    assert by_both.holds(StoreKey(KEY))
    assert not by_both.holds(StoreKey(OLD))


def test_the_process_key_is_one_per_process_and_never_the_next_ones() -> None:
    first = process_key()
    assert process_key() is first
    signed = PERMIT.signed(first)
    assert signed.holds(process_key())
    as_another_process()
    assert process_key() is not first
    assert not signed.holds(process_key())


def test_without_a_store_key_a_ledger_signs_with_the_process_key(tmp_path: Path) -> None:
    with open_checkpointer(f"sqlite:///{tmp_path / 'runs.sqlite'}") as saver:
        ledger = ledger_for(saver)
        ledger.append([PERMIT])
        (stored,) = ledger.book("t1", "q-1").records
    assert stored.verified
    assert stored.holds(process_key())
    as_another_process()  # the row stays in the database; the key that signed it is gone
    assert not stored.holds(process_key())


@pytest.mark.parametrize("key", [KEY, None], ids=["store-key", "no-key"])
def test_what_another_process_reads_verifies_only_under_a_store_key(
    tmp_path: Path, key: str | None
) -> None:
    """Records in the store's own database, read back by a process that did not write them."""
    with open_checkpointer(f"sqlite:///{tmp_path / 'runs.sqlite'}", key=key) as saver:
        ledger_for(saver).append([PERMIT])
        (stored,) = ledger_for(saver).book("t1", "q-1").records
        assert stored.verified
        assert stored.holds(StoreKey(KEY)) is (key is not None)
    as_another_process()
    with open_checkpointer(f"sqlite:///{tmp_path / 'runs.sqlite'}", key=key) as saver:
        (again,) = ledger_for(saver).book("t1", "q-1").records
        assert again.verified is (key is not None)
