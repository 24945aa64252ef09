"""gate's counters: every admitted call counts once, per tool and in total, so a cap of N lets
exactly N calls through; checked node by node on hand-built state and on whole runs."""

from __future__ import annotations

from typing import Any

import pytest

from gated_react._engine.call_keys import args_hash, idempotency_key, loop_key
from gated_react.nodes.gate import gate
from gated_react.state import State
from gated_react.stops import parse_stop_reason
from gated_react.testing import call

from ..support.helpers import deps, run, state

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


def _through_gate(current: State, **fields: Any) -> tuple[State, dict[str, Any]]:
    """One gate step; the next state holds its writes as the graph's channels would."""
    update = gate(current, CONFIG, deps=deps(**fields))
    data = current.model_dump(mode="json")
    data.update({key: update[key] for key in ("usage", "calls") if key in update})
    data["seen"] = [*data["seen"], *update.get("seen", [])]
    return State.model_validate(data), update


def _search(query: str, current: State | None = None) -> State:
    """A state whose proposed action is ``search_policy(query)``."""
    data = (
        state(usage={"steps": 1}).model_dump(mode="json")
        if current is None
        else (current.model_dump(mode="json"))
    )
    action = {"kind": "tool", "name": "search_policy", "args": {"query": query}}
    return State.model_validate({**data, "action": action})


def test_an_admitted_call_counts_once_in_total_and_for_its_tool() -> None:
    current = state(
        action={"kind": "tool", "name": "search_policy", "args": {"query": "a"}},
        usage={
            "steps": 4,
            "tool_calls": 3,
            "per_tool": {"search_policy": 1, "get_user_profile": 2},
        },
    )
    update = gate(current, CONFIG, deps=deps())
    assert update["usage"]["tool_calls"] == 4
    assert update["usage"]["per_tool"] == {"search_policy": 2, "get_user_profile": 2}
    assert update["usage"]["steps"] == 4
    assert update["seen"] == [loop_key("search_policy", {"query": "a"})]
    assert update["calls"][0] == {
        "step": 4,
        "tool": "search_policy",
        "args": {"query": "a"},
        "key": idempotency_key("t1", 4, "search_policy", {"query": "a"}),
        "id": None,
        "outcome": None,
    }


def test_a_tools_first_call_starts_its_count_at_one() -> None:
    update = gate(_search("a"), CONFIG, deps=deps())
    assert update["usage"]["per_tool"] == {"search_policy": 1}
    assert update["usage"]["tool_calls"] == 1


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_a_cap_of_n_admits_exactly_n_calls_node_by_node(cap: int) -> None:
    current = _search("q0")
    for i in range(cap):
        current, update = _through_gate(current, tool_limits={"search_policy": cap})
        assert "stop_reason" not in update, update
        assert current.usage.per_tool == {"search_policy": i + 1}
        current = _search(f"q{i + 1}", current)
    _, update = _through_gate(current, tool_limits={"search_policy": cap})
    assert update["stop_reason"] == "tool_limit:search_policy"
    assert update["message"] == f"tool_limit search_policy {cap} reached ({cap + 1} requested)"
    assert update["trace"] == [
        {
            "step": 1,
            "tool": "search_policy",
            "args_hash": args_hash({"query": f"q{cap}"}),
            "ok": False,
            "stop_reason": "tool_limit:search_policy",
        }
    ]
    assert "usage" not in update  # a refused call is not counted


def test_max_tool_calls_of_n_admits_exactly_n_calls_node_by_node() -> None:
    current = _search("q0")
    for i in range(2):
        current, update = _through_gate(current, max_tool_calls=2)
        assert "stop_reason" not in update, update
        current = _search(f"q{i + 1}", current)
    _, update = _through_gate(current, max_tool_calls=2)
    assert update["stop_reason"] == "max_tool_calls"


@pytest.mark.parametrize("cap", [1, 2])
def test_a_cap_of_n_runs_exactly_n_calls_end_to_end(cap: int) -> None:
    replies: list[Any] = [call("search_policy", query=f"q{i}") for i in range(cap + 1)]
    out = run([*replies, "done"], tool_limits={"search_policy": cap})
    assert out["stop_reason"] == "tool_limit:search_policy"
    assert out["message"] == f"tool_limit search_policy {cap} reached ({cap + 1} requested)"
    assert [h["action"]["args"]["query"] for h in out["history"]] == [f"q{i}" for i in range(cap)]
    assert out["usage"]["per_tool"] == {"search_policy": cap}
    assert out["usage"]["tool_calls"] == cap


def test_a_cap_counts_only_its_own_tool_end_to_end() -> None:
    replies = [
        call("get_user_profile", user_id=42),
        call("search_policy", query="refund"),
        call("get_user_billing", user_id=42),
        "USD 49",
    ]
    out = run(replies, tool_limits={"search_policy": 1}, max_tool_calls=3)
    assert out["stop_reason"] == "success"
    assert out["usage"]["per_tool"] == {
        "get_user_profile": 1,
        "search_policy": 1,
        "get_user_billing": 1,
    }
    assert out["usage"]["tool_calls"] == 3


@pytest.mark.parametrize("action", [None, {"kind": "final", "answer": "x"}])
def test_gate_without_a_tool_action_stops_with_a_reason(action: Any) -> None:
    update = gate(state(action=action), CONFIG, deps=deps())
    assert update == {
        "stop_reason": "invalid_action:no_action",
        "message": "the gate was reached without a tool call to check",
    }
    parse_stop_reason(update["stop_reason"])  # a documented reason (raises on unknown ones)
