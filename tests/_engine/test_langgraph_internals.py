"""Pins the LangGraph internals that ``_engine/langgraph_internals.py`` relies on: an upgrade
that changes them fails here."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import NS_SEP
from langgraph.channels import LastValue
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from gated_react._engine.langgraph_internals import (
    ask_human,
    can_pause,
    fuse_routes,
    node,
    route,
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


def _wide_graph(flag: str, router: Any = None) -> StateGraph[Any]:
    graph = StateGraph(Wide)
    graph.add_node("first", lambda s: {"flag": flag} if flag else {})
    graph.add_node("a", lambda s: {"path": [*s.get("path", []), f"a:{s.get('flag')}"]})
    graph.add_node("b", lambda s: {"path": [*s.get("path", []), f"b:{s.get('flag')}"]})
    graph.add_edge(START, "first")
    graph.add_conditional_edges("first", router or route(_router), ["a", "b"])
    graph.add_edge("a", END)
    graph.add_edge("b", END)
    return graph


def _wide(fused: bool, flag: str, *, run: str = "invoke") -> tuple[Any, Any]:
    """The graph's end (its ``updates`` stream under ``run="stream"``) and the copies made."""
    app = _wide_graph(flag).compile(checkpointer=InMemorySaver())
    if fused:
        fuse_routes(app)
    config: Any = {"configurable": {"thread_id": "t"}}
    COPIES.clear()
    if run == "ainvoke":
        return asyncio.run(app.ainvoke({"log": ["x"]}, config)), COPIES[:]
    if run == "stream":
        return list(app.stream({"log": ["x"]}, config, stream_mode="updates")), COPIES[:]
    return app.invoke({"log": ["x"]}, config), COPIES[:]


def test_a_fused_router_reads_its_channels_fresh_and_copies_no_other() -> None:
    """Routers see the node's own writes (and channels it did not write, or that are empty)
    as LangGraph's reader shows them, but only their channels are copied to read them, and
    only when the node wrote them; sync, async and streamed alike."""
    for flag in ("b", "a", ""):
        for run in ("invoke", "ainvoke", "stream"):
            langgraphs, langgraphs_copies = _wide(False, flag, run=run)
            fused, fused_copies = _wide(True, flag, run=run)
            assert fused == langgraphs
            assert sorted(langgraphs_copies) == ["flag", "log"]
            assert fused_copies == (["flag"] if flag else [])
    assert _wide(True, "b")[0]["path"] == ["b:b"]


def test_a_fused_router_decides_on_a_state_edited_as_its_node() -> None:
    graph = StateGraph(Wide)
    graph.add_node("first", lambda s: {})
    graph.add_node("a", lambda s: {"path": ["a"]})
    graph.add_node("b", lambda s: {"path": ["b"]})
    graph.add_edge(START, "first")
    graph.add_conditional_edges("first", route(_router), ["a", "b"])
    graph.add_edge("a", END)
    graph.add_edge("b", END)
    app = fuse_routes(graph.compile(checkpointer=InMemorySaver(), interrupt_before=["a", "b"]))
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"flag": "a"}, config)
    app.update_state(config, {"flag": "b"}, as_node="first")
    assert app.get_state(config).next == ("b",)
    assert app.invoke(None, config)["path"] == ["b"]


def test_a_router_that_takes_a_config_is_left_to_langgraph() -> None:
    seen: list[Any] = []

    def configured(state: Flag, config: RunnableConfig) -> Literal["a", "b"]:
        seen.append(config["configurable"]["thread_id"])
        return _router(state)

    app = fuse_routes(_wide_graph("b", route(configured)).compile(checkpointer=InMemorySaver()))
    writers = [type(w).__name__ for w in app.nodes["first"].writers]
    assert writers == ["ChannelWrite", "RunnableCallable"]
    assert app.invoke({}, {"configurable": {"thread_id": "t"}})["path"] == ["b:b"]
    assert seen == ["t"]


def test_every_router_of_the_gated_graph_is_fused_with_its_nodes_writes() -> None:
    from gated_react.graph import idle_graph

    nodes = idle_graph().nodes
    fused = {
        name for name, n in nodes.items() if [w.name for w in n.writers] == ["write_and_route"]
    }
    assert fused == {"decide", "validate", "gate", "observe"}
    readers = [nodes[name].writers[0].kwargs["reader"].func for name in fused]
    assert {reader.__name__ for reader in readers} == {"_fresh_read"}
