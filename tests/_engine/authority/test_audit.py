"""The views a run's record and conversation give when read back: the trace (every call that
reached the gate, how it went, the call that ended the run, the budgets a human extended), the
history (every call in the conversation with a real result), and the answer."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from gated_react._engine.authority.audit import answer, history, trace
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.conversation.chat import not_run, result
from gated_react._engine.execution.call_keys import args_hash
from gated_react.state import Extension
from gated_react.state.calls import canonical_json
from gated_react.store.key import StoreKey
from gated_react.testing import call

from ...support.helpers import REFUND_42, run

KEY = StoreKey("k" * 32)
PAY = {"amount": 5}


def _rec(kind: Kind, key: str, *, signed: bool = True, **body: Any) -> Record:
    record = Record("t", "r", kind, key, body)
    return record.signed(KEY) if signed else record


def _permit(call_id: str, tool: str = "pay", step: int = 0, **body: Any) -> Record:
    return _rec(Kind.PERMIT, f"k-{call_id}", call=call_id, tool=tool, step=step,
                args=canonical_json(PAY), **body)  # fmt: skip


def _dump(records: list[Record]) -> list[dict[str, Any]]:
    """The trace without step numbers (how a record's step maps to the trace's is pinned
    end to end: ``test_trace_and_history_agree_step_by_step``)."""
    return [e.model_dump(exclude_none=True, exclude={"step"}) for e in trace(records)]


def test_every_call_that_reached_the_gate_is_traced_once_in_order() -> None:
    records = [
        _permit("c1", step=0),
        _rec(Kind.STARTED, "k-c1", call="c1", tool="pay"),
        _rec(Kind.DONE, "k-c1", call="c1", tool="pay", ok=True),
        _rec(Kind.REFUSED, "k-c2", call="c2", tool="pay", step=1, args_hash=args_hash(PAY),
             error="loop_detected", by_human=False),
        _rec(Kind.REFUSED, "k-c3", call="c3", tool="search", step=1, args_hash="h3", error=None,
             by_human=True),
        _permit("c4", step=2),
        _rec(Kind.DONE, "k-c4", call="c4", tool="pay", ok=False, error="tool_error:pay"),
        _permit("c1", step=5),  # admitted again (an edit): traced once
        _permit("c5", step=3),  # let through, never finished (a crash while it ran)
    ]  # fmt: skip
    hashed = args_hash(PAY)
    assert _dump(records) == [
        {"tool": "pay", "args_hash": hashed, "ok": True},
        {"tool": "pay", "args_hash": hashed, "ok": False, "error": "loop_detected"},
        {"tool": "search", "args_hash": "h3", "ok": True, "by_human": True},  # answered
        {"tool": "pay", "args_hash": hashed, "ok": False, "error": "tool_error:pay"},
        {"tool": "pay", "args_hash": hashed, "ok": False},
    ]
    steps = [e.step for e in trace(records)]
    assert steps[0] < steps[1] == steps[2] < steps[3] < steps[4]  # as the records' steps go


def test_the_end_marks_the_call_that_caused_it() -> None:
    ended = _rec(Kind.ENDED, "r", reason="tool_error:pay", message="pay failed", call="c1",
                 tool="pay", args_hash=args_hash(PAY), step=0)  # fmt: skip
    failed = _rec(Kind.DONE, "k-c1", call="c1", tool="pay", ok=False, error="tool_error:pay")
    (entry,) = _dump([_permit("c1"), failed, ended])
    assert entry == {"tool": "pay", "args_hash": args_hash(PAY), "ok": False,
                     "stop_reason": "tool_error:pay"}  # fmt: skip
    stopped = _rec(Kind.ENDED, "r", reason="tool_denied:wire", call="c9", tool="wire",
                   args_hash="h9", step=1)  # fmt: skip
    assert _dump([_permit("c1"), stopped])[-1] == {  # stopped by the gate: no permit
        "tool": "wire", "args_hash": "h9", "ok": False, "stop_reason": "tool_denied:wire",
    }  # fmt: skip
    success = _rec(Kind.ENDED, "r", reason="success", message="final answer after 2 steps")
    assert _dump([_permit("c1"), success]) == _dump([_permit("c1")])
    no_call = _rec(Kind.ENDED, "r", reason="max_steps", message="max_steps 3 reached")
    assert _dump([_permit("c1"), no_call]) == _dump([_permit("c1")])


def test_a_budget_extended_is_traced_when_its_record_verifies_or_the_store_has_no_key() -> None:
    """With a key, a record that does not verify is a forgery: not shown. Without one, every
    record another process wrote is unverified: shown as recorded (it still raises no limit)."""
    grant = Extension(budget="max_steps", limit=12, was=8, spent=8, decision="approve", step=8)
    body = grant.model_dump(mode="json")
    forged = _rec(Kind.EXTENDED, "max_steps", signed=False, **body)
    assert _dump([forged]) == []
    (entry,) = _dump([_rec(Kind.EXTENDED, "max_steps", **body)])
    assert entry["extended"] == "max_steps 8 -> 12 (approve)"
    assert entry["tool"] == "max_steps"
    assert trace([_rec(Kind.EXTENDED, "max_steps", **body)])[0].step == grant.step
    assert [e.extended for e in trace([forged], unkeyed=True)] == ["max_steps 8 -> 12 (approve)"]


def _step(call_id: str, tool: str, content: str, *, ok: bool = True, **args: Any) -> list[Any]:
    asked = AIMessage("", tool_calls=[{"name": tool, "args": args, "id": call_id}])
    return [asked, result(tool, call_id, content, ok=ok)]


def test_history_is_every_call_with_a_real_result_numbered_by_its_run() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("first?"),
        *_step("c1", "lookup", '{"plan": "pro"}', user_id=42),
        *_step("c2", "lookup", "user 7 has no plan", user_id=7),
        AIMessage("Pro."),
        HumanMessage("second?"),
        *_step("c3", "pay", "pay failed: down", ok=False, amount=5),
        AIMessage("", tool_calls=[{"name": "pay", "args": {"amount": 6}, "id": "c4"}]),
        *not_run([{"name": "pay", "id": "c4"}], "not run (max_steps)"),
    ]
    entries = [e.model_dump() for e in history(messages)]
    assert [(e["step"], e["action"]["id"], e["observation"], e["ok"]) for e in entries] == [
        (1, "c1", {"plan": "pro"}, True),  # JSON text: its data
        (2, "c2", "user 7 has no plan", True),
        (1, "c3", "pay failed: down", False),  # ran and failed: a real result
    ]  # c4 never ran: its not-run note is no result
    assert entries[2]["action"]["args"] == {"amount": 5}


def test_a_result_that_is_json_is_its_data_in_the_history() -> None:
    messages = [HumanMessage("q"), *_step("c1", "double", "42", x=21),
                *_step("c2", "flags", "[true, null]"), *_step("c3", "say", "hello")]  # fmt: skip
    assert [e.observation for e in history(messages)] == [42, [True, None], "hello"]


@pytest.mark.parametrize(
    "text",
    ["[" * 300 + "]" * 300, "[" * 5000 + "]" * 5000, "[1, NaN]", '{"x": -Infinity}', f"[{2**64}]"],
    ids=["300 deep", "5000 deep", "NaN", "Infinity", "past 64 bits"],
)
def test_a_result_that_is_json_no_store_holds_is_its_text_in_the_history(text: str) -> None:
    """Before: a 300-deep array was its data, and the history did not serialize (pydantic's
    'Maximum serialization depth exceeded'); 5000 deep raised RecursionError; NaN and an
    integer no store holds were data too."""
    (entry,) = history([HumanMessage("q"), *_step("c1", "fetch", text)])
    assert entry.observation == text
    assert entry.model_dump_json()
    deep = "[" * 60 + "]" * 60
    (kept,) = history([HumanMessage("q"), *_step("c1", "fetch", deep)])
    assert kept.model_dump_json().count("[") == 60  # nested as deep as a store holds: data


def test_the_answer_is_the_last_messages_text_once_the_run_ended_with_one() -> None:
    said = {"messages": [HumanMessage("q"), AIMessage("USD 49.")]}
    assert answer({**said, "status": "ok", "stop_reason": "success"}) == "USD 49."
    assert answer({**said, "status": "stopped", "stop_reason": "max_steps"}) is None
    assert answer({**said, "status": "ok", "stop_reason": None}) is None  # not ended
    assert answer({**said, "status": None, "stop_reason": None}) is None
    direct = {"messages": [HumanMessage("q"), *_step("c1", "lookup", "found")],
              "status": "ok", "stop_reason": "success"}  # fmt: skip
    assert answer(direct) == "found"  # a return_direct tool's result


def test_trace_and_history_agree_step_by_step() -> None:
    out = run(REFUND_42)
    assert out["stop_reason"] == "success"
    assert [h["step"] for h in out["history"]] == [1, 2, 3]
    assert [t["step"] for t in out["trace"]] == [h["step"] for h in out["history"]]


def test_trace_holds_one_more_entry_than_history_the_call_the_gate_stopped() -> None:
    out = run([call("get_user_profile", user_id=42), call("delete_everything")])
    assert out["stop_reason"] == "tool_missing:delete_everything"
    assert [h["action"]["name"] for h in out["history"]] == ["get_user_profile"]
    assert [(t["tool"], t.get("stop_reason")) for t in out["trace"]] == [
        ("get_user_profile", None),
        ("delete_everything", "tool_missing:delete_everything"),
    ]
