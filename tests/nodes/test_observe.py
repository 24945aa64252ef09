from __future__ import annotations

from langchain_core.tools import tool

from gated_react.nodes.observe import observe

from ..support.helpers import deps, history_entry, state

OK_CALL = {
    "step": 2,
    "tool": "get_user_billing",
    "args": {"user_id": 42},
    "key": "k",
    "outcome": {"ok": True, "observation": {"billing": {}}},
}


def test_appends_history_and_trace_and_clears_the_call() -> None:
    update = observe(state(calls=[OK_CALL], usage={"steps": 2}), deps=deps())
    assert update["history"] == [history_entry(2, "get_user_billing", {"billing": {}}, user_id=42)]
    assert update["trace"] == [
        {"step": 2, "tool": "get_user_billing", "args_hash": "feaa769a39ae", "ok": True}
    ]
    assert update["calls"] == []
    assert "stop_reason" not in update


def test_a_call_that_stopped_the_run_is_traced_but_not_in_history() -> None:
    failed = {**OK_CALL, "outcome": {"ok": False, "error": "tool_error:get_user_billing"}}
    update = observe(state(calls=[failed], stop_reason="tool_error:get_user_billing"), deps=deps())
    assert "history" not in update
    assert update["trace"][0]["stop_reason"] == "tool_error:get_user_billing"
    assert update["trace"][0]["ok"] is False


def test_observed_errors_join_history_with_the_error_in_trace() -> None:
    failed = {**OK_CALL, "outcome": {"ok": False, "observation": "boom", "error": "tool_error:x"}}
    update = observe(state(calls=[failed]), deps=deps())
    assert update["history"][0]["observation"] == "boom"
    assert update["trace"][0]["error"] == "tool_error:x"


def test_budgets_are_checked_before_the_next_decision() -> None:
    update = observe(state(calls=[OK_CALL], usage={"steps": 4}), deps=deps(max_steps=4))
    assert update["stop_reason"] == "max_steps"
    assert len(update["history"]) == 1
    slow = observe(state(calls=[OK_CALL], usage={"steps": 1, "seconds": 30}), deps=deps())
    assert slow["stop_reason"] == "max_seconds"


def test_a_call_a_human_edited_keeps_the_models_arguments_and_its_result_says_what_ran() -> None:
    """Before: the result said "sent to user 7" under a call to user 42, and nothing said a
    human had changed it (the model's next turn read its own call as what ran)."""
    edited = {**OK_CALL, "id": "c1", "args": {"user_id": 7}}
    asked = {"kind": "tool", "name": "get_user_billing", "args": {"user_id": 42}, "id": "c1"}
    update = observe(state(calls=[edited], action=asked, usage={"steps": 2}), deps=deps())
    (entry,) = update["history"]
    assert (entry["action"]["args"], entry["proposed"]) == ({"user_id": 7}, {"user_id": 42})
    (answer,) = update["messages"]
    assert answer.text.startswith("Note: a human reviewer replaced this call before it ran")
    assert 'get_user_billing was called with {"user_id": 7}' in answer.text
    assert answer.text.endswith('Result:\n{"billing": {}}')
    same = observe(state(calls=[{**edited, "args": {"user_id": 42}}], action=asked), deps=deps())
    assert "proposed" not in same["history"][0]  # stored as before
    assert same["messages"][0].text == '{"billing": {}}'


def test_a_step_of_return_direct_calls_that_ran_ends_the_run_with_their_result() -> None:
    @tool(return_direct=True)
    def lookup_order(order_id: int) -> str:
        """Look up an order; its result is the answer."""
        return "shipped"

    ran = {"step": 1, "tool": "lookup_order", "args": {"order_id": 7}, "key": "k", "id": "c"}
    ok = {**ran, "outcome": {"ok": True, "observation": "Order 7: shipped"}}
    parts = deps(tools=[lookup_order], max_steps=1)  # no next step: no budget stops it
    update = observe(state(calls=[ok], usage={"steps": 1}), deps=parts)
    assert (update["stop_reason"], update["answer"]) == ("success", "Order 7: shipped")
    assert update["message"] == "lookup_order returned directly (return_direct) after 1 step"
    for outcome in (
        {"ok": False, "observation": "boom", "error": "tool_error:lookup_order"},
        {"ok": True, "observation": "told", "by_human": True},  # a human answered instead
    ):
        update = observe(state(calls=[{**ran, "outcome": outcome}]), deps=parts)
        assert "stop_reason" not in update
