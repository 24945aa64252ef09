"""Signing a store that exists (issue 45): threads written before the store key was set, and
rows signed by an older key, signed with the first key, so a paused unsigned run can be answered
and an older key dropped; a row no key given verifies is never signed over, and nothing is."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from gated_react import Policy, UnsafeCheckpoint, build_graph, open_checkpointer, read, resume
from gated_react._engine.authority.ledger import ledger_for
from gated_react.store.signed import unwrapped
from gated_react.store.signing import SigningError, sign_store
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools._meta import idempotent

from ..support.fakes import RAN
from ..support.helpers import as_subgraph
from ..support.tamper import forge_metadata, forge_record, records, snapshot

KEY, OLD, OTHER = "k" * 32, "o" * 32, "x" * 32
POLICY = Policy(allow=frozenset({"refund"}), require_approval=frozenset({"refund"}))


@idempotent
@tool
def refund(user_id: int) -> str:
    """Refund a user (needs a human's approval)."""
    RAN.append(f"refund {user_id}")
    return "refunded"


def _graph(saver: BaseCheckpointSaver[Any], *replies: Any) -> Any:
    return build_graph(ScriptedChatModel(replies=list(replies)), [refund], policy=POLICY,
                       checkpointer=saver)  # fmt: skip


def _paused(url: str, thread: str, key: str | list[str] | None) -> None:
    """``thread`` waits for a human to approve refund 7, written with ``key``."""
    with open_checkpointer(url, key=key) as saver:
        out = _graph(saver, call("refund", user_id=7)).invoke(
            {"goal": "refund user 7"}, {"configurable": {"thread_id": thread}}
        )
    assert out["__interrupt__"]


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _unverified(url: str, key: str) -> list[str]:
    """The kinds of the store's run records that ``key`` alone does not verify, as a run
    reads them."""
    runs = {(thread, run) for thread, run, _, _ in records(url)}
    assert runs
    with open_checkpointer(url, key=key) as saver:
        ledger = ledger_for(saver)
        found = [r for thread, run in runs for r in ledger.book(thread, run).records]
    return sorted(str(r.kind) for r in found if not r.verified)


def _approved(url: str, thread: str, key: str) -> str:
    with open_checkpointer(url, key=key) as saver:
        return str(resume(_graph(saver, "done"), thread, {"approved": True})["stop_reason"])


def test_a_store_written_without_a_key_is_signed_and_its_paused_run_answered(
    store_url: str,
) -> None:
    """Before: with the key set, the paused run could never be read or answered again."""
    _paused(store_url, "before-key", None)
    with pytest.raises(UnsafeCheckpoint, match="not signed"):
        _approved(store_url, "before-key", KEY)
    with open_checkpointer(store_url, key=KEY) as saver:
        report = sign_store(saver, unsigned=True)
    assert report.unsigned_threads == ["before-key"]
    assert report.signed == report.unsigned > 0
    assert (report.refused, report.changed) == ({}, [])
    assert _approved(store_url, "before-key", KEY) == "success"
    assert RAN == ["refund 7"]
    with open_checkpointer(store_url, key=KEY) as saver:
        again = sign_store(saver, unsigned=True)
    assert (again.signed, again.unsigned, again.current) == (0, 0, again.current)
    assert again.current > report.signed  # the rows signed, and the run's own since


def test_a_rotation_is_finished_by_signing_and_the_old_key_dropped(store_url: str) -> None:
    """Before: rows the old key signed stayed its own, and the old key could never go."""
    _paused(store_url, "rotated", OLD)
    with open_checkpointer(store_url, key=[KEY, OLD]) as saver:
        report = sign_store(saver)
    assert report.older > 0
    assert report.signed == report.older
    assert report.current == report.unsigned == 0
    assert _approved(store_url, "rotated", KEY) == "success"  # the new key alone
    with open_checkpointer(store_url, key=OLD) as saver, pytest.raises(UnsafeCheckpoint):
        read(_graph(saver), "rotated")
    assert RAN == ["refund 7"]


def test_a_rotation_keeps_the_permits_granted_under_the_old_key(store_url: str) -> None:
    """The run records (``gated_react_records``) are signed again too. Before: they kept the
    old key's signatures, so once it was dropped a human's approval given under it no longer
    verified and was asked again (a budget a human extended was lost the same way)."""
    _paused(store_url, "granted", OLD)
    with open_checkpointer(store_url, key=OLD) as saver:  # approved; stopped before it ran
        held = _graph(saver, "done").invoke(
            Command(resume={"approved": True}), _config("granted"), interrupt_before=["execute"]
        )
    assert "__interrupt__" not in held
    with open_checkpointer(store_url, key=[KEY, OLD]) as saver:
        report = sign_store(saver)
    assert (report.refused, report.changed) == ({}, [])
    assert report.signed == report.older
    assert {kind for _, _, kind, _ in records(store_url)} >= {"opened", "paid", "permit"}
    assert _unverified(store_url, KEY) == []
    with open_checkpointer(store_url, key=KEY) as saver:  # the old key dropped
        out = _graph(saver, "done").invoke(None, _config("granted"))
    assert "__interrupt__" not in out  # the approval holds: no human is asked again
    assert out["stop_reason"] == "success"
    assert RAN == ["refund 7"]


def test_a_subgraphs_records_are_signed_with_its_thread(store_url: str) -> None:
    """A graph run as a node of another keeps its records under ``<thread>|<namespace>``."""
    question = {"messages": [HumanMessage("refund user 7", id="q-7")]}
    with open_checkpointer(store_url, key=OLD) as saver:
        desk = as_subgraph(_graph(None, call("refund", user_id=7)), saver)  # type: ignore[arg-type]
        assert desk.invoke(question, _config("desk"))["__interrupt__"]
    kept = {thread for thread, *_ in records(store_url)}
    assert kept
    assert kept == {"desk|agent"}  # the node path, without task ids
    with open_checkpointer(store_url, key=[KEY, OLD]) as saver:
        report = sign_store(saver)
    assert (report.threads, report.refused, report.changed) == (1, {}, [])
    assert _unverified(store_url, KEY) == []


def test_a_record_no_key_verifies_is_never_signed_over_and_nothing_is(store_url: str) -> None:
    """A record edited with SQL (or forged) in a keyed thread: signing it would vouch for it."""
    _paused(store_url, "forged", OLD)
    assert forge_record(store_url, "forged", "opened", '{"policy": {}}') == 1
    before = (snapshot(store_url), records(store_url))
    with open_checkpointer(store_url, key=[KEY, OLD]) as saver:
        report = sign_store(saver, unsigned=True)
    assert list(report.refused) == ["forged"]
    assert report.refused["forged"].startswith("opened record of run ")
    assert report.refused["forged"].endswith(" does not match its signature")
    assert report.signed == 0
    assert (snapshot(store_url), records(store_url)) == before


def test_a_thread_written_without_a_key_has_its_records_signed_with_it(store_url: str) -> None:
    """Their signatures are the writing process's own key's, which no key given verifies:
    unsigned rows of that thread, signed with ``--unsigned`` like its checkpoints."""
    _paused(store_url, "plain", None)
    with open_checkpointer(store_url, key=KEY) as saver:
        dry = sign_store(saver, dry_run=True)
        report = sign_store(saver, unsigned=True)
    assert dry.unsigned_threads == ["plain"]
    assert dry.unsigned > len(snapshot(store_url)["checkpoints"])  # the records counted too
    assert report.signed == report.unsigned == dry.unsigned
    assert _unverified(store_url, KEY) == []


def test_a_row_no_key_verifies_is_never_signed_over_and_nothing_is(store_url: str) -> None:
    """A forged row (here: a keyed thread's metadata edited with SQL), or one signed by a key
    not given, stops the whole signing: its threads are named and not one row changes."""
    _paused(store_url, "forged", KEY)
    _paused(store_url, "foreign", OTHER)
    _paused(store_url, "unsigned", None)
    _paused(store_url, "honest", OLD)
    forge_metadata(store_url, "forged", "source", "loop")
    before = snapshot(store_url)
    with open_checkpointer(store_url, key=[KEY, OLD]) as saver:
        report = sign_store(saver, unsigned=True)
    assert sorted(report.refused) == ["foreign", "forged"]
    assert "does not match its signature" in report.refused["forged"]
    assert report.signed == 0
    assert snapshot(store_url) == before


def test_unsigned_threads_are_signed_only_when_asked(store_url: str) -> None:
    _paused(store_url, "unsigned", None)
    _paused(store_url, "old", OLD)
    before = snapshot(store_url)
    with open_checkpointer(store_url, key=[KEY, OLD]) as saver:
        report = sign_store(saver)
        dry = sign_store(saver, unsigned=True, dry_run=True)
    assert report.unsigned_threads == dry.unsigned_threads == ["unsigned"]
    assert report.signed == dry.signed == 0
    assert dry.older == report.older > 0
    assert snapshot(store_url) == before


def test_an_unsigned_row_added_to_a_signed_thread_is_refused(store_url: str) -> None:
    """A signed thread never holds an unsigned row: one there was put there by someone else,
    and signing it would vouch for it."""
    _paused(store_url, "t", KEY)
    with open_checkpointer(store_url, key=KEY) as saver:
        raw = unwrapped(saver)  # writes as they are given: unsigned
        latest = raw.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
        assert latest is not None
        raw.put_writes(latest.config, [("goal", "refund user 8")], "forged-task")
        report = sign_store(saver, unsigned=True)
    assert report.refused == {
        "t": "it holds signed and unsigned rows: an unsigned row was added to it"
    }
    assert report.signed == 0


def test_a_row_changed_while_signing_is_left_as_it_is(tmp_path: Any) -> None:
    """Each row is signed only if it is still the row that was checked."""
    from gated_react.store import signing
    from gated_react.store.key import StoreKey
    from gated_react.store.rows import dialect

    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    _paused(url, "t", OLD)
    with open_checkpointer(url, key=[KEY, OLD]) as saver:
        raw, sql = unwrapped(saver), dialect(unwrapped(saver))
        assert sql is not None
        plan = signing._plan(raw, sql, StoreKey([KEY, OLD]), "t")
        sign_store(saver)  # another signer got there first
        report = signing.Signing()
        signing._apply(raw, sql, "t", plan, report)
    assert report.signed == 0
    assert report.changed == ["t"]


def test_signing_needs_a_key_and_a_store_that_keeps_rows(tmp_path: Any) -> None:
    unkeyed = open_checkpointer(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    with unkeyed as saver, pytest.raises(SigningError, match="GATED_REACT_STORE_KEY"):
        sign_store(saver)
    with open_checkpointer("memory", key=KEY) as saver, pytest.raises(SigningError):
        sign_store(saver)


def test_a_row_under_another_checkpoint_id_is_not_signed(tmp_path: Any) -> None:
    """An unsigned row moved under another checkpoint id: a reader refuses it, so signing it
    would vouch for nothing."""
    import sqlite3
    from contextlib import closing

    path = tmp_path / "runs.sqlite"
    _paused(f"sqlite:///{path}", "moved", None)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint_id = checkpoint_id || '-x' WHERE checkpoint_id ="
            " (SELECT min(checkpoint_id) FROM checkpoints)"
        )
    with open_checkpointer(f"sqlite:///{path}", key=KEY) as saver:
        report = sign_store(saver, unsigned=True)
    assert "holds another one" in report.refused["moved"]
    assert report.signed == 0
