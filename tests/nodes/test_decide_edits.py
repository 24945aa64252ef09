"""One-channel edits of how a run opens and ends buy no budget (a real SqliteSaver; found by an
outside tester, December 2026, against the ``turn`` channel: moved forward at every step, it
opened a run with fresh budgets each time, 13 tool calls under 2, 31 replies under
``max_steps=2``, 0.0433 USD under 0.01). A run is its question's now (the id of the thread's last
human message), its spend is its record's, and no channel but ``messages`` names a run; so each
of the state's other channels is written at every step here, and the run stops where an
unedited run stops. ``status`` written alone as ``finish`` or ``stop`` ended the thread with no
stop reason; a status without one is no end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langgraph.types import Command

from gated_react import Budget, Policy, Price, build_graph
from gated_react.graph import GatedGraph
from gated_react.runs import read
from gated_react.testing import ScriptedChatModel, call

from ..support.fakes import RAN, lookup

CFG: Any = {"configurable": {"thread_id": "t"}}
PRICES = {"scripted": Price(input=2, output=2)}
EDITS = [
    pytest.param({"status": "ok"}, id="status"),
    pytest.param({"status": "ok", "stop_reason": "success", "message": "done"}, id="end"),
    pytest.param({"step": None}, id="step"),
    pytest.param({"structured_response": {"answer": 1}}, id="structured_response"),
    pytest.param({"goal": "g"}, id="the same goal"),
]


def _graph(saver: Any, policy: Policy) -> GatedGraph:
    replies = [call("lookup", q=f"i{i}") for i in range(60)]
    return build_graph(
        ScriptedChatModel(replies=replies), [lookup], policy=policy, checkpointer=saver
    )


def _edited_each_step(graph: GatedGraph, edit: Callable[[], None], rounds: int = 12) -> Any:
    graph.invoke({"goal": "g"}, CFG, interrupt_after=["observe"])
    for _ in range(rounds):
        if not graph.get_state(CFG).next:
            break
        edit()
    return read(graph, "t")


@pytest.mark.parametrize("written", EDITS)
def test_an_edit_at_every_step_buys_no_tool_calls(store: Any, written: dict[str, Any]) -> None:
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    graph = _graph(store, policy)

    def edit() -> None:
        graph.update_state(CFG, written, as_node="observe")
        graph.invoke(None, CFG, interrupt_after=["observe"])

    result = _edited_each_step(graph, edit)
    assert len(RAN) == 2, f"{len(RAN)} tool calls ran under max_tool_calls=2"
    assert result["stop_reason"] == "max_tool_calls"


@pytest.mark.parametrize("written", EDITS)
def test_a_command_that_writes_and_goes_to_decide_buys_no_tool_calls(
    store: Any, written: dict[str, Any]
) -> None:
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    graph = _graph(store, policy)

    def edit() -> None:
        graph.invoke(Command(update=written, goto="decide"), CFG, interrupt_after=["observe"])

    result = _edited_each_step(graph, edit)
    assert len(RAN) == 2, f"{len(RAN)} tool calls ran under max_tool_calls=2"
    assert result["stop_reason"] == "max_tool_calls"


@pytest.mark.parametrize("written", EDITS)
@pytest.mark.parametrize(
    ("budget", "stop"),
    [
        (Budget(max_steps=2, max_tool_calls=100), "max_steps"),
        (Budget(max_steps=50, max_tool_calls=100, max_cost=0.01), "max_cost"),
    ],
    ids=["max_steps", "max_cost"],
)
def test_an_edit_at_every_step_buys_no_steps_or_cost(
    store: Any, budget: Budget, stop: str, written: dict[str, Any]
) -> None:
    """Before: 31 model calls under ``max_steps=2``; and 31 priced replies, 0.0433 USD in
    all, under ``max_cost=0.01`` (the same run unedited stops with ``max_cost`` after 13
    replies, 0.0113 USD: the limit once reached, one reply over)."""
    policy = Policy(budget=budget, loop_detection="off", prices=PRICES)
    graph = _graph(store, policy)

    def edit() -> None:
        graph.update_state(CFG, written, as_node="observe")
        graph.invoke(None, CFG, interrupt_after=["observe"])

    result = _edited_each_step(graph, edit, rounds=30)
    spent = result["usage"]
    assert budget.max_cost is None or spent["cost"] < budget.max_cost + 0.001, (
        f"{spent['steps']} replies costing {spent['cost']:.4f} USD under max_cost={budget.max_cost}"
    )
    assert spent["steps"] <= budget.max_steps, (
        f"{spent['steps']} model calls under max_steps={budget.max_steps}"
    )
    assert result["stop_reason"] == stop


@pytest.mark.parametrize("as_node", ["finish", "stop"])
def test_an_edit_of_status_as_the_last_node_does_not_end_the_run_without_a_stop_reason(
    store: Any, as_node: str
) -> None:
    """One channel, ``update_state({"status": ...}, as_node="finish")`` (or ``"stop"``) in the
    middle of a run (1 tool call of ``max_tool_calls=2`` made): the thread has nothing next,
    and it must not read as a run that ended without a stop reason, which the README says
    never happens."""
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    graph = _graph(store, policy)
    graph.invoke({"goal": "g"}, CFG, interrupt_after=["observe"])
    status = "ok" if as_node == "finish" else "stopped"
    graph.update_state(CFG, {"status": status}, as_node=as_node)
    graph.invoke(None, CFG)
    result = read(graph, "t")
    assert result["status"] is None or result["stop_reason"] is not None, (
        f"the run ended with status {result['status']!r} and stop_reason None"
    )
