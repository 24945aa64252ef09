"""Pins the LangGraph internals that ``_engine/langgraph_internals.py`` relies on: an upgrade
that changes them fails here."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import PUSH
from langgraph.channels import LastValue
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from gated_react._engine.langgraph_internals import (
    ask_human,
    is_resuming,
    is_time_travel,
    narrow_routes,
    node,
    route,
    runtime_of,
    was_sent,
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


def test_time_travel_is_seen_by_every_node_of_a_replay_and_not_by_a_resume() -> None:
    flags: list[tuple[str, bool]] = []

    def first(state: S, config: RunnableConfig) -> S:
        flags.append(("first", is_time_travel(config)))
        interrupt("pause")
        return {}

    def second(state: S, config: RunnableConfig) -> S:
        flags.append(("second", is_time_travel(config)))
        return {}

    app = _two_nodes(first, second).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "x"}}
    app.invoke({}, config)
    head = app.get_state(config).config
    app.invoke(Command(resume=True), head)  # Studio resumes with the checkpoint's id
    assert flags == [("first", False), ("first", False), ("second", False)]
    flags.clear()
    start = next(s for s in app.get_state_history(config) if s.next == ("first",)).config
    app.invoke(None, start)  # a replay: the question is asked again
    app.invoke(Command(resume=True), config)
    assert flags == [("first", True), ("first", False), ("second", False)]
    flags.clear()
    second = next(s for s in app.get_state_history(config) if s.next == ("second",)).config
    app.invoke(None, second)
    assert flags == [("second", True)]


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


COPIES: list[str] = []


class _Counted(LastValue[Any]):
    """A channel that notes each copy LangGraph makes of it."""

    def copy(self) -> _Counted:
        COPIES.append(str(self.key))
        return super().copy()  # type: ignore[return-value]


class Wide(TypedDict, total=False):
    flag: Annotated[str, _Counted(str)]
    log: Annotated[list[str], _Counted(list)]
    path: list[str]


class Flag(TypedDict, total=False):
    flag: str


def _router(state: Flag) -> Literal["a", "b"]:
    return "b" if state.get("flag") == "b" else "a"


def _wide(narrow: bool, flag: str, edit: dict[str, Any] | None = None) -> tuple[Any, Any]:
    graph = StateGraph(Wide)
    graph.add_node("first", lambda s: {"flag": flag} if flag else {})
    graph.add_node("a", lambda s: {"path": [*s.get("path", []), f"a:{s.get('flag')}"]})
    graph.add_node("b", lambda s: {"path": [*s.get("path", []), f"b:{s.get('flag')}"]})
    graph.add_edge(START, "first")
    graph.add_conditional_edges("first", route(_router), ["a", "b"])
    graph.add_edge("a", END)
    graph.add_edge("b", END)
    app = graph.compile(checkpointer=InMemorySaver())
    if narrow:
        narrow_routes(app)
    config: Any = {"configurable": {"thread_id": "t"}}
    COPIES.clear()
    return app.invoke({"log": ["x"]}, config), COPIES[:]


def test_a_narrowed_router_reads_its_channels_fresh_and_copies_no_other() -> None:
    """Routers see the node's own writes (and channels it did not write, or that are empty)
    as LangGraph's reader shows them, but only their channels are copied to read them."""
    for flag in ("b", "a", ""):
        wide, wide_copies = _wide(False, flag)
        narrow, narrow_copies = _wide(True, flag)
        assert narrow == wide
        assert sorted(wide_copies) == ["flag", "log"]
        assert narrow_copies == ["flag"]
    assert _wide(True, "b")[0]["path"] == ["b:b"]


def test_a_narrowed_router_decides_on_a_state_edited_as_its_node() -> None:
    graph = StateGraph(Wide)
    graph.add_node("first", lambda s: {})
    graph.add_node("a", lambda s: {"path": ["a"]})
    graph.add_node("b", lambda s: {"path": ["b"]})
    graph.add_edge(START, "first")
    graph.add_conditional_edges("first", route(_router), ["a", "b"])
    graph.add_edge("a", END)
    graph.add_edge("b", END)
    app = narrow_routes(graph.compile(checkpointer=InMemorySaver(), interrupt_before=["a", "b"]))
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"flag": "a"}, config)
    app.update_state(config, {"flag": "b"}, as_node="first")
    assert app.get_state(config).next == ("b",)


def test_every_router_of_the_gated_graph_is_narrowed() -> None:
    from gated_react.graph import idle_graph

    readers = [
        writer.kwargs["reader"].func
        for pregel_node in idle_graph().nodes.values()
        for writer in pregel_node.writers
        if "reader" in getattr(writer, "kwargs", {})
    ]
    assert len(readers) == 4
    assert {reader.__name__ for reader in readers} == {"_fresh_read"}
