"""A tool with ``return_direct=True`` ends the run with its result, as ``create_agent`` does:
the model is not called again, and the gate and budgets hold as for any call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Policy, build_graph, result_of
from gated_react.testing import ScriptedChatModel, call

from ..support.results import invoked


@tool(return_direct=True)
def lookup_order(order_id: int) -> str:
    """Look up an order; its result is the answer."""
    if order_id < 0:
        raise ValueError("no such order")
    return f"Order {order_id}: shipped"


@tool
def note(text: str) -> str:
    """Take a note."""
    return "noted"


ASKED = {"messages": [HumanMessage("where is order 7?")]}


def _kinds(out: dict[str, Any]) -> list[str]:
    return [m.type for m in out["messages"]]


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_the_run_ends_with_the_tools_result_as_under_create_agent(use_async: bool) -> None:
    """Before, the model was called again and its reply was the answer."""
    outs = []
    for make in (create_agent, build_graph):
        model = ScriptedChatModel(replies=[call("lookup_order", order_id=7), "called again"])
        agent: Any = make(model, [lookup_order])
        outs.append(asyncio.run(agent.ainvoke(ASKED)) if use_async else agent.invoke(ASKED))
        assert len(model.requests) == 1
    theirs, ours = outs
    assert _kinds(ours) == _kinds(theirs) == ["human", "ai", "tool"]
    assert ours["messages"][-1].content == theirs["messages"][-1].content == "Order 7: shipped"
    assert (ours["status"], ours["stop_reason"]) == ("ok", "success")
    assert set(ours) - {"status", "stop_reason", "message"} == set(
        theirs
    )  # their keys, and the stop
    result = result_of(agent, ours)
    assert result["answer"] == "Order 7: shipped"
    assert [t["ok"] for t in result["trace"]] == [True]


def test_a_follow_up_on_the_thread_sees_the_result_and_runs_afresh() -> None:
    model = ScriptedChatModel(replies=[call("lookup_order", order_id=7), "It ships today."])
    graph = build_graph(model, [lookup_order], checkpointer=InMemorySaver())
    thread: RunnableConfig = {"configurable": {"thread_id": "direct"}}
    graph.invoke(ASKED, thread)
    out = invoked(graph, {"messages": [HumanMessage("when?")]}, thread)
    assert (out["stop_reason"], out["answer"]) == ("success", "It ships today.")
    shown = [m for m in model.requests[1] if isinstance(m, ToolMessage)]
    assert [m.content for m in shown] == ["Order 7: shipped"]


def test_a_failed_call_or_a_step_with_another_tool_goes_back_to_the_model() -> None:
    """Only a step whose every call is to a return_direct tool that ran ends the run."""
    failing = ScriptedChatModel(replies=[call("lookup_order", order_id=-1), "Sorry."])
    graph = build_graph(failing, [lookup_order], policy=Policy(on_tool_error="observe"))
    assert invoked(graph, ASKED)["answer"] == "Sorry."
    both = call("lookup_order", order_id=7)
    both.tool_calls.append({"name": "note", "args": {"text": "x"}, "id": "c2", "type": "tool_call"})
    mixed = ScriptedChatModel(replies=[both, "Shipped, noted."])
    graph = build_graph(mixed, [lookup_order, note], policy=Policy(max_parallel_calls=2))
    assert invoked(graph, ASKED)["answer"] == "Shipped, noted."


def test_the_gate_still_decides_whether_it_runs() -> None:
    model = ScriptedChatModel(replies=[call("lookup_order", order_id=7)])
    graph = build_graph(model, [lookup_order, note], policy=Policy(allow={"note"}))
    out = graph.invoke(ASKED)
    assert out["stop_reason"] == "tool_denied:lookup_order"
    assert out["status"] == "stopped"
