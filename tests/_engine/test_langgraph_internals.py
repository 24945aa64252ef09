"""Pins the LangGraph internals that ``_engine/langgraph_internals.py`` relies on: an upgrade
that changes them fails here."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from gated_react._engine.langgraph_internals import came_from_an_edit, is_resuming, node


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


def _edit_probe(state: S, config: RunnableConfig) -> S:
    return {"seen": [*state.get("seen", []), came_from_an_edit(config)]}


def test_came_from_an_edit_reads_who_wrote_the_checkpoint_a_node_starts_from() -> None:
    """``loop`` (a node wrote it, the thread's latest) or an in-memory start: False;
    ``update_state``, a fork (``as_node="__copy__"``) or a replay of an older checkpoint: True.
    A node reached inside an invocation is never asked."""
    graph = _two_nodes(_edit_probe, _edit_probe)
    app = graph.compile(checkpointer=InMemorySaver(), interrupt_before=["second"])
    honest: Any = {"configurable": {"thread_id": "honest"}}
    app.invoke({"seen": []}, honest)
    assert app.invoke(None, honest)["seen"] == [False, False]
    replayed = next(s for s in app.get_state_history(honest) if s.next == ("second",))
    assert app.invoke(None, replayed.config)["seen"][-1] is True  # time travel to a past step
    for thread, as_node in (("edited", "first"), ("copied", "__copy__")):
        config: Any = {"configurable": {"thread_id": thread}}
        app.invoke({"seen": []}, config)
        app.update_state(config, {"seen": ["x"]} if as_node == "first" else None, as_node=as_node)
        assert app.invoke(None, config)["seen"][-1] is True, thread
