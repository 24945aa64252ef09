"""Pins the LangGraph internals that ``_engine/langgraph_internals.py`` relies on: an upgrade
that changes them fails here."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import PUSH
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from gated_react._engine.langgraph_internals import ask_human, is_resuming, node, was_sent


class S(TypedDict, total=False):
    seen: list[Any]


def _two_nodes(first: Any, second: Any) -> StateGraph[S]:
    graph = StateGraph(S)
    graph.add_node("first", first)
    graph.add_node("second", second)
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    return graph


def test_node_binds_keywords_and_runs_sync_bodies_inline_under_ainvoke() -> None:
    threads: list[int] = []

    def body(state: S, config: RunnableConfig, *, tag: str) -> S:
        threads.append(threading.get_ident())
        return {"seen": [tag, bool(config)]}

    graph = StateGraph(S)
    graph.add_node("n", node(body, tag="bound"))
    graph.add_edge(START, "n")
    graph.add_edge("n", END)

    async def main() -> Any:
        threads.append(threading.get_ident())
        return await graph.compile().ainvoke({})

    assert asyncio.run(main())["seen"] == ["bound", True]
    assert threads[0] == threads[1]


def test_resuming_is_true_only_in_the_first_node_of_a_resumed_invocation() -> None:
    flags: list[tuple[str, bool]] = []

    def first(state: S, config: RunnableConfig) -> S:
        flags.append(("first", is_resuming(config)))
        interrupt("pause")
        return {}

    def second(state: S, config: RunnableConfig) -> S:
        flags.append(("second", is_resuming(config)))
        return {}

    app = _two_nodes(first, second).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "x"}}
    app.invoke({}, config)
    app.invoke(Command(resume=True), config)
    assert flags == [("first", False), ("first", True), ("second", False)]


def _sent_probe(state: S, config: RunnableConfig) -> S:
    return {"seen": [*state.get("seen", []), was_sent(config)]}


def test_was_sent_tells_a_send_from_an_edge_whatever_the_callers_metadata_says() -> None:
    """A node reached by an edge or a ``goto``: False; by a ``Send``, from a ``Command`` given
    as input or from a node's own ``Command``: True. A caller's metadata cannot say otherwise."""
    graph = _two_nodes(_sent_probe, _sent_probe)
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}, "metadata": {"langgraph_path": ("x",)}}
    assert app.invoke({"seen": []}, config)["seen"] == [False, False]
    assert app.invoke(Command(goto="second"), config)["seen"][-1] is False
    pushed = app.invoke(Command(goto=Send("second", {"seen": []})), config)
    assert pushed["seen"][-1] is True
    claimed: Any = {**config, "metadata": {"langgraph_path": (PUSH, "x")}}
    assert app.invoke(Command(goto="second"), claimed)["seen"][-1] is False


def _asking(name: str) -> Any:
    def ask(state: S) -> S:
        answer = ask_human({"q": name}, lambda raised, shown: raised == shown)
        return {"seen": [*state.get("seen", []), f"{name}={answer}"]}

    return ask


def test_an_answer_is_taken_only_by_the_task_that_raised_the_same_question() -> None:
    """The task's raised interrupts are read from the scratchpad's pending writes: the asking
    task takes the bare resume; a task a ``goto`` adds to the same superstep raises its own
    question instead of taking the answer meant for another."""
    app = _two_nodes(_asking("first"), _asking("second")).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    (asked,) = app.invoke({"seen": []}, config)["__interrupt__"]
    assert asked.value == {"q": "first"}
    both = app.invoke(Command(resume="yes", goto="second"), config)
    assert [i.value for i in both["__interrupt__"]] == [{"q": "second"}]
    assert both["seen"] == ["first=yes"]
