"""observe routes on the step's results and writes nothing but a ``return_direct`` answer; what
a run did is derived: its history from the conversation, its trace from the record."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool

from gated_react._engine.authority import admit, audit
from gated_react._engine.authority.approval import Decision
from gated_react._engine.execution.call_keys import args_hash
from gated_react.errors import MisroutedStep
from gated_react.nodes.decide import decide
from gated_react.nodes.execute import execute
from gated_react.nodes.gate import gate
from gated_react.nodes.observe import observe
from gated_react.routing import after_observe

from ..support.fakes import broken
from ..support.helpers import deps, state
from .hand import ending, paid_steps, proposal, ran, saved, through, trace

BILLING = ("get_user_billing", {"user_id": 42})


def _ran(*calls: tuple[str, dict[str, Any]], config: Any = None, **fields: Any) -> dict[str, Any]:
    """The state after the gate and execute (or stop) took ``calls``."""
    asked = proposal(*calls)
    current = state(messages=[asked["message"]], calls=asked["calls"])
    return ran(current, config or saved(), deps(**fields))


def _history(current: dict[str, Any]) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json") for e in audit.history(current["messages"])]


def test_a_step_that_ran_writes_nothing_and_is_in_the_history_and_the_trace() -> None:
    config = saved()
    after = _ran(BILLING, config=config)
    assert observe(after, deps=deps()) == {}
    assert after_observe(after) == "next"
    assert _history(after) == [
        {
            "step": 1,
            "action": {
                "kind": "tool",
                "name": "get_user_billing",
                "args": {"user_id": 42},
                "id": "c1",
            },
            "observation": {
                "billing": {
                    "currency": "USD",
                    "plan": "pro_monthly",
                    "price_usd": 49.0,
                    "days_since_first_payment": 10,
                }
            },
            "ok": True,
        }
    ]
    (traced,) = trace(config)
    assert {k: v for k, v in traced.items() if k != "step"} == {
        "tool": "get_user_billing",
        "args_hash": args_hash({"user_id": 42}),
        "ok": True,
    }


def test_a_call_that_failed_and_stopped_the_run_is_in_both_with_its_stop() -> None:
    config = saved()
    after = _ran(("broken", {}), config=config, tools=[broken])
    assert after["stop_reason"] == "tool_error:broken"
    (entry,) = _history(after)
    assert (entry["ok"], entry["action"]["name"]) == (False, "broken")
    (traced,) = trace(config)
    assert (traced["ok"], traced["stop_reason"]) == (False, "tool_error:broken")


def test_a_call_the_gate_stopped_before_it_ran_is_traced_but_not_in_the_history() -> None:
    config = saved()
    after = _ran(("nope", {}), config=config)
    assert after["stop_reason"] == "tool_missing:nope"
    assert _history(after) == []
    assert [t.get("stop_reason") for t in trace(config)] == ["tool_missing:nope"]


def test_observed_errors_join_history_with_the_error_in_trace() -> None:
    config = saved()
    after = _ran(("broken", {}), config=config, tools=[broken], on_tool_error="observe")
    assert observe(after, deps=deps(tools=[broken], on_tool_error="observe")) == {}
    (entry,) = _history(after)
    assert "disk on fire" in entry["observation"]
    assert trace(config)[0]["error"] == "tool_error:broken"


def test_budgets_are_checked_before_the_next_decision() -> None:
    """observe goes to decide, which stops on a spent budget before any model call."""
    config, parts = saved(), deps(["never"], max_steps=1)
    paid_steps(config, 1)
    after = _ran(BILLING, config=config)
    assert after_observe(after) == "next"
    assert ending(decide(after, config, deps=parts))["reason"] == "max_steps"
    assert parts.model.requests == []  # type: ignore[attr-defined]


def test_a_call_a_human_edited_keeps_the_models_arguments_and_its_result_says_what_ran(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the result said "sent to user 7" under a call to user 42, and nothing said a
    human had changed it (the model's next turn read its own call as what ran). The history
    shows the call as it ran, with what it returned (before, the model's arguments beside
    user 7's billing, and the note in the observation)."""
    monkeypatch.setattr(admit, "ask", lambda *_: Decision(approved=True, args={"user_id": 7}))
    after = _ran(BILLING, require_approval=frozenset({"get_user_billing"}))
    assert after["messages"][-2].tool_calls[0]["args"] == {"user_id": 42}  # the model's call
    (entry,) = _history(after)
    assert entry["action"]["args"] == {"user_id": 7}  # what ran
    assert entry["observation"]["billing"]["plan"] == "free"  # user 7's, without the note
    answer = after["messages"][-1]
    assert answer.text.startswith("Note: a human reviewer replaced this call before it ran")
    assert 'get_user_billing was called with {"user_id": 7}' in answer.text
    assert '"plan": "free"' in answer.text.split("Result:")[1]  # user 7's billing
    monkeypatch.setattr(admit, "ask", lambda *_: Decision(approved=True, args={"user_id": 42}))
    same = _ran(BILLING, require_approval=frozenset({"get_user_billing"}))
    assert not same["messages"][-1].text.startswith("Note:")  # stored as before


def test_an_edited_call_replayed_is_answered_from_the_record_as_it_ran(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """execute replayed after the edited call returned (a crash before its checkpoint): the
    answer from the record says what ran, as the first one did (before: the bare result under
    the model's call, and the history showed user 42)."""
    monkeypatch.setattr(admit, "ask", lambda *_: Decision(approved=True, args={"user_id": 7}))
    config, parts = saved(), deps(require_approval=frozenset({"get_user_billing"}))
    asked = proposal(BILLING)
    gated = through(gate, state(messages=[asked["message"]], calls=asked["calls"]), config, parts)
    first, again = (through(execute, gated, config, parts) for _ in range(2))
    assert again["messages"][-1].text == first["messages"][-1].text
    (entry,) = _history(again)
    assert (entry["action"]["args"], entry["observation"]["billing"]["plan"]) == (
        {"user_id": 7},
        "free",
    )


@tool(return_direct=True)
def lookup_order(order_id: int) -> str:
    """Look up an order; its result is the answer."""
    return f"Order {order_id}: shipped"


@tool(return_direct=True)
def failing_order(order_id: int) -> str:
    """Fails."""
    raise RuntimeError("boom")


def test_a_step_of_return_direct_calls_that_ran_ends_the_run_with_their_result() -> None:
    parts = deps(tools=[lookup_order, failing_order], max_steps=1, on_tool_error="observe")
    after = _ran(("lookup_order", {"order_id": 7}), tools=[lookup_order], max_steps=1)
    update = observe(after, deps=parts)
    assert update["step"]["answer"] == {"text": "Order 7: shipped", "direct": True}
    assert after_observe(update) == "direct"
    failed = _ran(
        ("failing_order", {"order_id": 7}), tools=[failing_order], on_tool_error="observe"
    )
    assert observe(failed, deps=parts) == {}


def test_observe_refuses_a_step_whose_calls_never_ran() -> None:
    asked = proposal(BILLING)
    with pytest.raises(MisroutedStep, match=r"^observe was reached with calls that never ran"):
        observe(state(messages=[asked["message"]], calls=asked["calls"]), deps=deps())
