"""One-channel edits of how a run opens buy no budget (a real SqliteSaver; found by an outside
tester, December 2026). ``turn`` moved *forward*, to the id of the newest message (the step's
own tool result), left no message after it, and the goal differed from that message's text:
the next decision took it as a new message and opened a run with fresh budgets at every step
(13 tool calls under 2, 31 replies under ``max_steps=2``, 0.0433 USD under 0.01). A turn now
names a human message or nothing. ``status`` written alone as ``finish`` or ``stop`` ended the
thread with no stop reason; a status without one is now no end.
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


def _graph(saver: Any, policy: Policy) -> GatedGraph:
    replies = [call("lookup", q=f"i{i}") for i in range(60)]
    return build_graph(
        ScriptedChatModel(replies=replies), [lookup], policy=policy, checkpointer=saver
    )


def _newest(values: dict[str, Any]) -> str:
    """The id of the thread's newest message: the tool result of the step just observed."""
    return str(values["messages"][-1].id)


def _turn_moved_forward_each_step(
    graph: GatedGraph, edit: Callable[[str], None], rounds: int = 12
) -> dict[str, Any]:
    graph.invoke({"goal": "g"}, CFG, interrupt_after=["observe"])
    for _ in range(rounds):
        snapshot = graph.get_state(CFG)
        if not snapshot.next:
            break
        edit(_newest(snapshot.values))
    return dict(graph.get_state(CFG).values)


def test_an_edit_of_turn_to_the_newest_message_buys_tool_calls(store: Any) -> None:
    """``update_state({"turn": <id of the newest message>}, as_node="observe")`` at every step,
    one channel: 13 tool calls ran under ``max_tool_calls=2`` (each step opened a run with
    fresh budgets), and the thread never reached a stop reason."""
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    graph = _graph(store, policy)

    def edit(newest: str) -> None:
        graph.update_state(CFG, {"turn": newest}, as_node="observe")
        graph.invoke(None, CFG, interrupt_after=["observe"])

    state = _turn_moved_forward_each_step(graph, edit)
    assert len(RAN) == 2, f"{len(RAN)} tool calls ran under max_tool_calls=2"
    assert state["stop_reason"] == "max_tool_calls"


def test_a_command_that_moves_turn_forward_buys_tool_calls(store: Any) -> None:
    """``Command(update={"turn": <id of the newest message>}, goto="decide")`` at every step:
    13 tool calls ran under ``max_tool_calls=2``."""
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    graph = _graph(store, policy)

    def edit(newest: str) -> None:
        command = Command(update={"turn": newest}, goto="decide")
        graph.invoke(command, CFG, interrupt_after=["observe"])

    state = _turn_moved_forward_each_step(graph, edit)
    assert len(RAN) == 2, f"{len(RAN)} tool calls ran under max_tool_calls=2"
    assert state["stop_reason"] == "max_tool_calls"


@pytest.mark.parametrize(
    ("budget", "stop"),
    [
        (Budget(max_steps=2, max_tool_calls=100), "max_steps"),
        (Budget(max_steps=50, max_tool_calls=100, max_cost=0.01), "max_cost"),
    ],
    ids=["max_steps", "max_cost"],
)
def test_an_edit_of_turn_to_the_newest_message_buys_steps_and_cost(
    store: Any, budget: Budget, stop: str
) -> None:
    """The same one-channel ``turn`` edit: 31 model calls under ``max_steps=2``; and 31 priced
    replies, 0.0433 USD in all, under ``max_cost=0.01`` (the same run unedited stops with
    ``max_cost`` after 13 replies, 0.0113 USD: the limit once reached, one reply over)."""
    policy = Policy(budget=budget, loop_detection="off", prices=PRICES)
    graph = _graph(store, policy)

    def edit(newest: str) -> None:
        graph.update_state(CFG, {"turn": newest}, as_node="observe")
        graph.invoke(None, CFG, interrupt_after=["observe"])

    state = _turn_moved_forward_each_step(graph, edit, rounds=30)
    spent = [c for c in state["spend"] if c is not None]
    assert budget.max_cost is None or sum(spent) < budget.max_cost + max(spent), (
        f"{len(spent)} replies costing {sum(spent):.4f} USD under max_cost={budget.max_cost}"
    )
    assert len(state["spend"]) <= budget.max_steps, (
        f"{len(state['spend'])} model calls under max_steps={budget.max_steps}"
    )
    assert state["stop_reason"] == stop


@pytest.mark.parametrize("as_node", ["finish", "stop"])
def test_an_edit_of_status_as_the_last_node_ends_the_run_with_no_stop_reason(
    store: Any, as_node: str
) -> None:
    """One channel, ``update_state({"status": ...}, as_node="finish")`` (or ``"stop"``) in the
    middle of a run (1 tool call of ``max_tool_calls=2`` made): the thread has nothing next,
    ``invoke(None)`` runs nothing, and ``read`` returns ``status`` "ok" (or "stopped") with
    ``stop_reason`` None and no message: a run that ended without a stop reason, which the
    README says never happens, and no ``MisroutedStep`` as for a goto to those nodes."""
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
