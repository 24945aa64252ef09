"""gate's counters: every call it lets through counts once in the run's record, per tool and in
total, so a cap of N lets exactly N calls through; checked node by node on hand-built state and
on whole runs. The counts are the record's: nothing in the state is read for them."""

from __future__ import annotations

from typing import Any

import pytest

from gated_react._engine.execution.call_keys import args_hash
from gated_react.errors import MisroutedStep
from gated_react.nodes.execute import execute
from gated_react.nodes.gate import gate
from gated_react.nodes.observe import observe
from gated_react.testing import call

from ..support.helpers import deps, run, state
from .hand import applied, ending, paid_steps, proposal, ran, records, saved, trace, usage


def _search(query: str, config: Any, n: int = 1, **fields: Any) -> dict[str, Any]:
    """The state after ``search_policy(query)`` went through the gate (and execute, when the
    gate let it through) in the run of ``config``."""
    asked = proposal(("search_policy", {"query": query}), first=n)
    return ran(state(messages=[asked["message"]], calls=asked["calls"]), config, deps(**fields))


def test_an_admitted_call_counts_once_in_total_and_for_its_tool() -> None:
    config = saved()
    paid_steps(config, 4)
    _search("earlier", config, 10)
    for n, user in ((20, 1), (21, 2)):
        asked = proposal(("get_user_profile", {"user_id": user}), first=n)
        ran(state(messages=[asked["message"]], calls=asked["calls"]), config, deps())
    asked = proposal(("search_policy", {"query": "a"}))
    current = state(messages=[asked["message"]], calls=asked["calls"])
    after = applied(current, gate(current, config, deps=deps()))
    spent = usage(config)
    assert (spent.tool_calls, spent.steps) == (4, 4)
    assert spent.per_tool == {"search_policy": 2, "get_user_profile": 2}
    permit = records(config)[-1]
    assert (permit.kind, permit.key) == ("permit", after["step"]["calls"][0]["key"])
    assert (permit.body["call"], permit.body["step"]) == ("c1", 1)  # the step on its branch


def test_a_tools_first_call_starts_its_count_at_one() -> None:
    config = saved()
    asked = proposal(("search_policy", {"query": "a"}))
    gate(state(messages=[asked["message"]], calls=asked["calls"]), config, deps=deps())
    assert usage(config).per_tool == {"search_policy": 1}
    assert usage(config).tool_calls == 1


def test_a_call_the_gate_sees_twice_counts_once() -> None:
    """A step gated again (a replay of the gate's checkpoint, a resume after a crash) holds
    the same call ids: the record counts each call once."""
    config = saved()
    asked = proposal(("search_policy", {"query": "a"}))
    current = state(messages=[asked["message"]], calls=asked["calls"])
    for _ in range(3):
        gate(current, config, deps=deps(max_tool_calls=1))
    assert usage(config).tool_calls == 1


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_a_cap_of_n_admits_exactly_n_calls_node_by_node(cap: int) -> None:
    config = saved()
    for i in range(cap):
        after = _search(f"q{i}", config, 10 * i + 1, tool_limits={"search_policy": cap})
        assert ending(after) is None, after
        assert usage(config).per_tool == {"search_policy": i + 1}
    stopped = _search(f"q{cap}", config, 99, tool_limits={"search_policy": cap})
    assert ending(stopped)["reason"] == "tool_limit:search_policy"
    said = f"tool_limit search_policy {cap} reached ({cap + 1} requested)"
    assert ending(stopped)["message"] == stopped["message"] == said
    assert {k: v for k, v in trace(config)[-1].items() if k != "step"} == {
        "tool": "search_policy",
        "args_hash": args_hash({"query": f"q{cap}"}),
        "ok": False,
        "stop_reason": "tool_limit:search_policy",
    }
    assert usage(config).per_tool == {"search_policy": cap}  # a refused call is not counted


def test_max_tool_calls_of_n_admits_exactly_n_calls_node_by_node() -> None:
    config = saved()
    for i in range(2):
        assert ending(_search(f"q{i}", config, 10 * i + 1, max_tool_calls=2)) is None
    assert ending(_search("q2", config, 99, max_tool_calls=2))["reason"] == "max_tool_calls"


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


def test_a_gate_reached_without_calls_lets_nothing_through_and_the_run_refuses() -> None:
    """A step with no calls (an edit sent it there) gets no permit; the next node refuses
    in one line (``MisroutedStep``), nothing ran."""
    config = saved()
    current = state()
    after = applied(current, gate(current, config, deps=deps()))
    assert records(config) == []
    after = applied(after, execute(after, config, deps=deps()))
    with pytest.raises(MisroutedStep, match=r"^observe was reached with calls that never ran"):
        observe(after, deps=deps())


def test_history_and_trace_agree_step_by_step() -> None:
    from ..support.helpers import REFUND_42

    out = run(REFUND_42)
    assert out["stop_reason"] == "success"
    assert [h["step"] for h in out["history"]] == [1, 2, 3]
    assert [t["step"] for t in out["trace"]] == [h["step"] for h in out["history"]]
