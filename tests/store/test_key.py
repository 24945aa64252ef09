"""The store key (issue 28 item 7): with a key, every checkpoint and pending write is signed and
bound to its thread, checkpoint and parent; a row edited, forged or copied under another thread
is refused in one line (``UnsafeCheckpoint``) by every read, on SQLite and Postgres, sync and
async. Without a key nothing changes, and the copy attack still works (shown below)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver

from gated_react import (
    Budget,
    Policy,
    ThreadBusy,
    UnsafeCheckpoint,
    aopen_checkpointer,
    aresume,
    build_graph,
    open_checkpointer,
    read,
    resume,
)
from gated_react._engine.authority.ledger import ledger_for
from gated_react._engine.authority.records import Kind, Record
from gated_react.errors import StoreError
from gated_react.runs import run_book
from gated_react.state import Extension
from gated_react.store import signed
from gated_react.store.key import (
    SEALED,
    SEALED_BYTES,
    TAG,
    StoreKey,
    unsealed,
    write_digest,
)
from gated_react.store.locks import thread_lock
from gated_react.store.serializer import SignatureRefused
from gated_react.store.signed import SignedSaver
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools._meta import idempotent
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.fakes import RAN
from ..support.tamper import (
    copy_rows,
    forge_metadata,
    forge_record,
    reparent,
    rewrite_latest,
    set_write,
)

KEY, OLD = "k" * 32, "o" * 32
INTERRUPT, RESUME = "__interrupt__", "__resume__"  # LangGraph's own names (private constants)


@idempotent
@tool
def refund(user_id: int) -> str:
    """Refund a user (needs a human's approval)."""
    RAN.append(f"refund {user_id}")
    return "refunded"


POLICY = Policy(allow=frozenset({"refund"}), require_approval=frozenset({"refund"}))


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _graph(saver: BaseCheckpointSaver[Any], *replies: Any, policy: Policy = POLICY) -> Any:
    return build_graph(ScriptedChatModel(replies=list(replies)), [refund], policy=policy,
                       checkpointer=saver)  # fmt: skip


def _raw(saver: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
    assert isinstance(saver, SignedSaver)
    return saver.inner


def _paid(url: str, key: str | None) -> str:
    """Thread ``paid``: a refund a human approved, run once; the id of the checkpoint the gate
    asked from, which holds the question and the human's answer as pending writes."""
    with open_checkpointer(url, key=key) as saver:
        graph = _graph(saver, call("refund", user_id=7), "done")
        assert graph.invoke({"goal": "refund user 7"}, _config("paid"))["__interrupt__"]
        assert resume(graph, "paid", {"approved": True})["stop_reason"] == "success"
        answered = [
            t for t in saver.list(_config("paid")) if any(w[1] == RESUME for w in t.pending_writes)
        ]
    assert RAN == ["refund 7"]
    (asked,) = answered
    return str(asked.config["configurable"]["checkpoint_id"])


def test_without_a_key_a_copied_approval_runs_nothing_again(store_url: str) -> None:
    """Without a key the approved call's rows, copied under another thread id (up to the
    question, with the human's answer), read as a thread of its own. The call keeps its id, and
    the run's record says it ran and what it returned: the copy is answered with that, and
    nothing runs again. (Before issue 28 item 1 it ran the refund a second time with nobody
    asked; then it asked again.)"""
    upto = _paid(store_url, None)
    assert copy_rows(store_url, "paid", "again", upto=upto, writes_before=False) > 0
    with open_checkpointer(store_url) as saver:
        out = _graph(saver, "done").invoke(None, _config("again"))
    assert RAN == ["refund 7"]
    assert out["stop_reason"] == "success"
    (answer,) = [m for m in out["messages"] if m.type == "tool"]
    assert answer.text == "refunded"  # what the refund returned in thread "paid"


def test_with_a_key_a_copied_approval_is_refused_and_runs_nothing(store_url: str) -> None:
    upto = _paid(store_url, KEY)
    copy_rows(store_url, "paid", "again", upto=upto, writes_before=False)
    with open_checkpointer(store_url, key=KEY) as saver:
        graph = _graph(saver, "done")
        with pytest.raises(UnsafeCheckpoint, match="does not match its signature") as refused:
            graph.invoke(None, _config("again"))
        assert read(graph, "paid")["stop_reason"] == "success"  # the original still reads
    assert "\n" not in str(refused.value)
    assert "'again'" in str(refused.value)
    assert RAN == ["refund 7"]


def test_the_async_saver_refuses_the_copy_too(store_url: str) -> None:
    upto = _paid(store_url, KEY)
    copy_rows(store_url, "paid", "again", upto=upto, writes_before=False)

    async def resumed() -> None:
        async with aopen_checkpointer(store_url, key=KEY) as saver:
            await _graph(saver, "done").ainvoke(None, _config("again"))

    with pytest.raises(UnsafeCheckpoint, match="'again'"):
        asyncio.run(resumed())
    assert RAN == ["refund 7"]


def _waiting(saver: BaseCheckpointSaver[Any], thread: str = "t") -> Any:
    graph = _graph(saver, call("refund", user_id=7), "done")
    assert graph.invoke({"goal": "refund user 7"}, _config(thread))["__interrupt__"]
    return graph


def test_a_checkpoint_whose_bytes_were_edited_is_refused(store_url: str) -> None:
    with open_checkpointer(store_url, key=KEY) as saver:
        graph = _waiting(saver)
        rewrite_latest(_raw(saver), "t", {"goal": "refund user 8"})  # its signature kept
        for reading in (lambda: read(graph, "t"), lambda: resume(graph, "t", {"approved": True})):
            with pytest.raises(UnsafeCheckpoint, match="does not match its signature"):
                reading()
        with pytest.raises(UnsafeCheckpoint):
            list(graph.get_state_history(_config("t")))
    assert RAN == []


_ASKS = Policy(allow=frozenset({"refund"}), budget=Budget(max_tool_calls=1), on_budget="ask")
_RAISED = Extension(budget="max_tool_calls", limit=100, was=1, spent=1, decision="approve",
                    step=1)  # fmt: skip
_TWO_REFUNDS = (call("refund", user_id=7), call("refund", user_id=8), "done")


def test_an_extension_edited_into_the_state_is_refused(store_url: str) -> None:
    """Under ``on_budget="ask"`` extensions raise limits: edited in, they are refused."""
    with open_checkpointer(store_url, key=KEY) as saver:
        graph = _graph(saver, *_TWO_REFUNDS, policy=_ASKS)
        assert graph.invoke({"goal": "refunds"}, _config("t"))["__interrupt__"]  # the budget asks
        rewrite_latest(_raw(saver), "t", {"extensions": [_RAISED]})
        with pytest.raises(UnsafeCheckpoint):
            graph.invoke(None, _config("t"))
    assert RAN == ["refund 7"]


def test_without_a_key_an_extension_written_into_the_store_raises_no_limit(
    tmp_path: Path,
) -> None:
    """Under ``on_budget="ask"`` an extension written into the store used to count like a
    human's (the call the budget held back ran). Extensions are records now, counted only when
    their signature verifies: one written into the state, or a record row written with SQL
    (here through the backend, which stores what it is given), raises nothing, and the budget
    asks again."""
    with open_checkpointer(f"sqlite:///{tmp_path / 'runs.sqlite'}") as saver:
        graph = _graph(saver, *_TWO_REFUNDS, policy=_ASKS)
        assert graph.invoke({"goal": "refunds"}, _config("t"))["__interrupt__"]
        rewrite_latest(saver, "t", {"extensions": [_RAISED]})
        ledger = ledger_for(saver)
        run = ledger.backend.last_run("t")
        assert run is not None
        forged = Record("t", run, Kind.EXTENDED, "max_tool_calls", _RAISED.model_dump(mode="json"))
        ledger.backend.insert([forged])
        assert graph.invoke(None, _config("t"))["__interrupt__"][0].value["kind"] == "budget"
        assert run_book(saver, "t").tally.extensions == []
    assert RAN == ["refund 7"]


def test_forged_metadata_is_refused(store_url: str) -> None:
    """An edit through the graph's own API is signed and reads back; its metadata rewritten
    with SQL (``source: update`` made ``loop``, so it looks like a node's) is refused."""
    with open_checkpointer(store_url, key=KEY) as saver:
        graph = _waiting(saver)
        graph.update_state(_config("t"), {"message": "refund user 7, edited"})
        assert graph.get_state(_config("t")).values["message"] == "refund user 7, edited"
        assert graph.get_state(_config("t")).metadata["source"] == "update"
        forge_metadata(store_url, "t", "source", "loop")
        with pytest.raises(UnsafeCheckpoint, match="does not match its signature"):
            read(graph, "t")


def test_a_pending_write_edited_or_copied_from_another_checkpoint_is_refused(
    store_url: str,
) -> None:
    """The question a human is shown is a pending write: rewritten, or taken from another
    thread's checkpoint, it is refused."""
    with open_checkpointer(store_url, key=KEY) as saver:
        graph = _waiting(saver, "t")
        _waiting(saver, "u")
        raw = _raw(saver)
        found = raw.get_tuple(_config("u"))
        assert found is not None
        (task, channel, sealed) = found.pending_writes[0]
        assert channel == INTERRUPT
        assert sealed[0] == SEALED_BYTES
        target = raw.get_tuple(_config("t"))
        assert target is not None
        target_task = target.pending_writes[0][0]
        raw.put_writes(target.config, [(INTERRUPT, sealed)], target_task)  # u's, copied to t
        with pytest.raises(UnsafeCheckpoint, match="pending write to '__interrupt__'"):
            read(graph, "t")
        raw.put_writes(found.config, [(INTERRUPT, unsealed(raw.serde, sealed))], task)  # unsigned
        with pytest.raises(UnsafeCheckpoint, match="is not signed by the key"):
            read(graph, "u")


def test_writes_sealed_with_their_value_by_an_earlier_release_are_read_and_resumed(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pending write was stored as ``(SEALED, index, tag, value)`` before it was stored as
    bytes: a run paused then shows its question and resumes, and its writes still verify."""

    def sealed_whole(key: StoreKey, serde: Any, where: Any, task: str, *, idx: int,
                     channel: str, value: Any) -> tuple[Any, ...]:  # fmt: skip
        digest = write_digest(serde, where, task, idx=idx, channel=channel, value=value)
        return SEALED, idx, key.sign(digest), value

    monkeypatch.setattr(signed, "sealed_write", sealed_whole)
    with open_checkpointer(store_url, key=KEY) as saver:
        _waiting(saver)
        found = _raw(saver).get_tuple(_config("t"))
        assert found is not None
        assert found.pending_writes
        assert {w[2][0] for w in found.pending_writes} == {SEALED}
    monkeypatch.undo()
    with open_checkpointer(store_url, key=KEY) as saver:
        graph = _graph(saver, "done")
        assert [q["tool"] for q in read(graph, "t")["pending"]] == ["refund"]
        assert resume(graph, "t", {"approved": True})["stop_reason"] == "success"
    assert RAN == ["refund 7"]


def test_an_unsigned_store_is_refused_with_how_to_migrate(store_url: str) -> None:
    with open_checkpointer(store_url) as saver:
        _waiting(saver)
    unsigned = pytest.raises(UnsafeCheckpoint, match="not signed with the store key")
    with open_checkpointer(store_url, key=KEY) as saver, unsigned as refused:
        read(_graph(saver), "t")
    assert "gated-react sign --unsigned" in str(refused.value)


def test_a_keyed_thread_read_without_a_key_says_it_is_signed(store_url: str) -> None:
    """Before: its sealed writes were read as values ("Unsupported message type", "'str' object
    has no attribute 'value'"), and the thread looked damaged."""
    with open_checkpointer(store_url, key=KEY) as saver:
        _waiting(saver)
    with open_checkpointer(store_url) as saver:
        graph = _graph(saver, "done")
        for reading in (lambda: read(graph, "t"), lambda: resume(graph, "t", {"approved": True})):
            with pytest.raises(SignatureRefused, match="signed with a store key") as refused:
                reading()
            assert refused.value.kind == "keyed"
            assert "\n" not in str(refused.value)
    assert RAN == []


def test_keys_rotate_the_first_signs_and_the_older_still_read(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    with open_checkpointer(url, key=OLD) as saver:
        _waiting(saver)
    with open_checkpointer(url, key=[KEY, OLD]) as saver:
        done = resume(_graph(saver, "done"), "t", {"approved": True})
        assert done["stop_reason"] == "success"
        latest = _raw(saver).get_tuple(_config("t"))
        assert latest is not None
        assert TAG in latest.metadata
    with open_checkpointer(url, key=KEY) as saver:  # the thread still holds old rows
        latest = _raw(saver).get_tuple(_config("t"))
        assert latest is not None
        assert saver.get_tuple(latest.config) is not None  # a new row reads with the new key
        with pytest.raises(UnsafeCheckpoint, match="key not in GATED_REACT_STORE_KEY"):
            read(_graph(saver), "t")  # the state is rebuilt from older rows too
    assert RAN == ["refund 7"]


def test_honest_runs_approvals_and_updates_work_with_a_key(store_url: str) -> None:
    async def in_async() -> dict[str, Any]:
        async with aopen_checkpointer(store_url, key=KEY) as saver:
            graph = _graph(saver, call("refund", user_id=9), "done")
            assert (await graph.ainvoke({"goal": "refund 9"}, _config("a")))["__interrupt__"]
            done = await aresume(graph, "a", {"approved": True})
            await graph.aupdate_state(_config("a"), {"message": "refund user 9"})
            return done

    with open_checkpointer(store_url, key=KEY) as saver:
        graph = _waiting(saver)
    with open_checkpointer(store_url, key=KEY) as saver:  # resumed by a new saver
        done = resume(_graph(saver, "done"), "t", {"approved": True})
    assert done["stop_reason"] == asyncio.run(in_async())["stop_reason"] == "success"
    with open_checkpointer(store_url, key=KEY) as saver:
        graph = _graph(saver)
        assert graph.get_state(_config("a")).values["message"] == "refund user 9"
        assert len(list(graph.get_state_history(_config("t")))) > 5
    assert RAN == ["refund 7", "refund 9"]


def test_a_bad_key_is_one_line_and_never_shown(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    short = pytest.raises(StoreError, match="shorter than 16 bytes")
    with short as refused, open_checkpointer(url, key="hunter2"):
        pass
    assert "hunter2" not in str(refused.value)
    assert "\n" not in str(refused.value)
    with open_checkpointer(url, key=[]) as saver:  # no key: the saver as before
        assert not isinstance(saver, SignedSaver)
    assert KEY not in repr(StoreKey([KEY, OLD]))


def test_support_tools_run_signed_in_memory_too() -> None:
    with open_checkpointer("memory", key=KEY) as saver:
        graph = build_graph(ScriptedChatModel(replies=["hi"]), SUPPORT_TOOLS, checkpointer=saver)
        assert graph.invoke({"goal": "hello"}, _config("m"))["stop_reason"] == "success"
        assert read(graph, "m")["answer"] == "hi"


def test_a_signing_saver_still_holds_its_thread_against_another_connection(
    store_url: str,
) -> None:
    """The thread lock looks at the saver that stores the rows: on Postgres a session lock that
    a second connection must see (it was skipped for a wrapped saver)."""
    with open_checkpointer(store_url, key=KEY) as one, open_checkpointer(store_url, key=KEY) as two:
        graph = _waiting(one)
        with thread_lock(one, "t"), pytest.raises(ThreadBusy):
            resume(_graph(two, "done"), "t", {"approved": True})
        assert resume(graph, "t", {"approved": True})["stop_reason"] == "success"
    assert RAN == ["refund 7"]


def _with_a_write_to(raw: BaseCheckpointSaver[Any], thread: str, channel: str) -> Any:
    """The oldest checkpoint of ``thread`` holding a write to ``channel`` (raw, unchecked)."""
    rows = [t for t in raw.list(_config(thread)) if any(w[1] == channel for w in t.pending_writes)]
    return rows[-1]


def test_an_older_rows_record_erased_or_reparented_is_refused_when_the_thread_is_read(
    store_url: str,
) -> None:
    """A thread's conversation is rebuilt from the writes of its earlier checkpoints
    (DeltaChannel): a call's result erased there (what the history and loop detection read),
    or an earlier checkpoint pointed at another parent, is refused when the latest is read."""
    _paid(store_url, KEY)
    with open_checkpointer(store_url, key=KEY) as saver:
        graph, raw = _graph(saver), _raw(saver)
        older = _with_a_write_to(raw, "paid", "messages")
        (write,) = [w for w in older.pending_writes if w[1] == "messages"]
        sealed = write[2]
        erased = raw.serde.dumps_typed((*sealed[:3], *raw.serde.dumps_typed([])))
        cid = older.config["configurable"]["checkpoint_id"]
        assert set_write(store_url, "paid", cid, "messages", erased) == 1
        with pytest.raises(UnsafeCheckpoint, match="pending write to 'messages'"):
            read(graph, "paid")
        assert set_write(store_url, "paid", cid, "messages", raw.serde.dumps_typed(sealed)) == 1
        assert read(graph, "paid")["stop_reason"] == "success"  # put back: reads again
        reparent(store_url, "paid", cid, None)
        with pytest.raises(UnsafeCheckpoint, match="does not match its signature"):
            read(graph, "paid")


def test_a_payment_record_edited_in_a_keyed_store_stops_the_run_it_would_free(
    store_url: str,
) -> None:
    """Before: an edited ``paid`` record did not verify, so its call fell back to its estimate
    (a few tokens for 120 paid): every edit lowered the spend, and the resumed run went past
    ``max_tokens``, ending ``success`` with 240 tokens paid under 100."""
    usage = {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
    replies = [
        call("refund", user_id=7).model_copy(update={"usage_metadata": usage}),
        AIMessage("Refunded.", usage_metadata=usage),  # type: ignore[arg-type]
    ]
    policy = Policy(allow=frozenset({"refund"}), require_approval=frozenset({"refund"}),
                    budget=Budget(max_tokens=100))  # fmt: skip
    with open_checkpointer(store_url, key=KEY) as saver:
        assert _graph(saver, *replies, policy=policy).invoke(
            {"goal": "refund user 7"}, _config("edited")
        )[INTERRUPT]
    assert forge_record(store_url, "edited", "paid", '{"tokens": 0, "cost": 0.0}') == 1
    with open_checkpointer(store_url, key=KEY) as saver:
        out = resume(_graph(saver, replies[1], policy=policy), "edited", {"approved": True})
    assert out["stop_reason"] == "max_tokens"
    assert out["message"].startswith("max_tokens 100 cannot be checked: its paid record of ")
    assert out["message"].endswith("does not verify with the store key (edited, forged or copied)")
    assert RAN == ["refund 7"]  # the call a human approved ran; no model call after it
