"""Pins the LangGraph internals ``_engine/langgraph_internals/routes.py`` relies on: a router
reads its own channels fresh, in its node's writer, as LangGraph's own branch would route."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.channels import LastValue
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from gated_react._engine.langgraph_internals import fuse_routes, route

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
