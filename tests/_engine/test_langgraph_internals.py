"""Pins the LangGraph internals ``_engine/langgraph_internals/__init__.py`` relies on: an
upgrade that changes them fails here (the routers' in ``langgraph_internals/test_routes.py``)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import NS_SEP
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from gated_react._engine.langgraph_internals import (
    ask_human,
    can_pause,
    node,
    resuming,
    run_key,
    runtime_of,
    saver_of,
)


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


def test_run_key_and_saver_of_name_a_nodes_thread_graph_and_checkpointer() -> None:
    """What a node's records are filed under (``authority/ledger.Place``): the thread and the
    namespace of the graph the node runs in (empty at the top; the parent's task in a
    subgraph, the same for every node of that subgraph's run), and the checkpointer, the
    parent's for a subgraph."""
    seen: list[tuple[str, Any, str, Any, bool]] = []

    def probe(name: str) -> Any:
        def body(state: S, config: RunnableConfig) -> S:
            thread, namespace = run_key(config)
            seen.append((name, thread, namespace, saver_of(config), can_pause(config)))
            return {}

        return body

    inner = _two_nodes(probe("in-1"), probe("in-2")).compile()
    outer = StateGraph(S)
    outer.add_node("top", probe("top"))
    outer.add_node("agent", inner)
    outer.add_edge(START, "top")
    outer.add_edge("top", "agent")
    outer.add_edge("agent", END)
    saver = InMemorySaver()
    outer.compile(checkpointer=saver).invoke({}, {"configurable": {"thread_id": "t"}})
    top, first, second = seen
    assert top == ("top", "t", "", saver, True)
    assert first[1:] == second[1:]  # one run of the subgraph: one place
    assert first[1] == "t"
    assert first[2] == "agent"  # the node path, without task ids (new on each attempt)
    assert NS_SEP not in first[2]
    assert (first[3], first[4]) == (saver, True)
    seen.clear()
    _two_nodes(probe("a"), probe("b")).compile().invoke({})
    assert [(s[2], s[3], s[4]) for s in seen] == [("", None, False)] * 2


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


def test_resuming_is_true_only_in_the_first_step_of_a_pass_that_goes_on() -> None:
    """A pass that brings an answer, and one that goes on after a crash (``input=None``), flag
    the tasks of their first step; a new input, and every later step, do not."""
    seen: list[tuple[str, bool]] = []
    crash = [True]

    def probe(name: str, asks: bool = False, fails: bool = False) -> Any:
        def body(state: S, config: RunnableConfig) -> S:
            seen.append((name, resuming(config)))
            if asks:
                ask_human({"q": name}, lambda raised, shown: raised == shown)
            if fails and crash:  # the first time only
                crash.pop()
                raise RuntimeError("the process died here")
            return {}

        return body

    graph = _two_nodes(probe("asks", asks=True), probe("fails", fails=True))
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({}, config)
    with pytest.raises(RuntimeError):
        app.invoke(Command(resume="yes"), config)
    app.invoke(None, config)
    app.invoke({}, config)
    assert seen == [
        ("asks", False),  # a new input
        ("asks", True), ("fails", False),  # the answer's pass, then its next step
        ("fails", True),  # on after the crash
        ("asks", False),  # a new input again
    ]  # fmt: skip
    assert not resuming({})


def test_runtime_of_is_the_runtime_a_node_would_be_given() -> None:
    found: list[Any] = []

    def body(state: S, config: RunnableConfig) -> S:
        found.append(runtime_of(config))
        return {}

    graph = StateGraph(S)
    graph.add_node("n", node(body))
    graph.add_edge(START, "n")
    graph.compile().invoke({}, context={"user": "ann"})
    assert found[0].context == {"user": "ann"}
    assert runtime_of({}).context is None  # a node called by hand: an empty runtime
