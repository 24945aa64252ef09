"""LangGraph's conditional edges as this graph runs them: each router reads only its own
channels, in the same writer as its node's writes. The graph as built and drawn is LangGraph's
(edges, path maps, ``Literal`` routers); only how a compiled node runs its branch changes.
``tests/_engine/langgraph_internals/test_routes.py`` pins what this relies on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_READ
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph._branch import BranchSpec
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel._algo import local_read
from langgraph.pregel._read import PregelNode
from langgraph.pregel._write import ChannelWrite

__all__ = ["fuse_routes", "route"]


def route(router: Callable[..., Any]) -> RunnableCallable:
    """A router as an untraced runnable: a plain function would open a traced child run on every
    routing decision, which at four routers per step is most of the routing cost."""
    return RunnableCallable(router, trace=False)


def fuse_routes(
    graph: CompiledStateGraph[Any, Any, Any, Any],
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``graph`` with each router reading only the channels its input schema names, run in
    the same writer as its node's writes.

    LangGraph hands a router the state as the node just left it by copying *every* channel
    and applying the node's writes to the copies (``local_read`` with ``fresh=True``), then
    picking the router's channels out. The reader set here does the same for the router's
    own channels only.

    A conditional edge is also a step of its own after the node's writes: a child callback
    manager, the branch's runnable, the router's runnable inside it, and the ``ChannelWrite``
    it returns, at four routers a step about 55 K instructions each. Where a node's writers
    are its writes then its one branch (every routed node here), both run as one writer:
    the writes, then the router called as the function it is, then LangGraph's own
    ``BranchSpec._finish`` turning its answer into the same writes. The graph as built and
    drawn (edges, path maps, ``Literal`` routers) is unchanged; ``update_state(...,
    as_node=...)`` runs the same writer.
    """
    for pregel_node in graph.nodes.values():
        for writer in pregel_node.writers:
            if isinstance(writer, RunnableCallable) and _routes(writer):
                reader = writer.kwargs.get("reader")
                if isinstance(reader, partial) and not isinstance(reader.keywords["select"], str):
                    select, mapper = reader.keywords["select"], reader.keywords.get("mapper")
                    writer.kwargs["reader"] = partial(_fresh_read, select=select, mapper=mapper)
        _fuse(pregel_node)
    return graph


def _routes(writer: RunnableCallable) -> bool:
    """Whether ``writer`` is a conditional edge's (``BranchSpec.run`` made it)."""
    return getattr(writer.func, "__func__", None) is BranchSpec._route


def _fuse(pregel_node: PregelNode) -> None:
    """The node's writes and its branch as one writer, when those are its writers."""
    match pregel_node.writers:
        case [ChannelWrite() as writes, RunnableCallable() as branch] if (
            type(writes) is ChannelWrite
            and ChannelWrite.get_static_writes(writes) is None  # no Command(goto=) edges drawn
            and _routes(branch)
            and branch.kwargs.get("reader")
        ):
            spec = cast(BranchSpec, cast(Any, branch.func).__self__)
            path = spec.path
            router = getattr(path, "func", None)
            if not isinstance(path, RunnableCallable) or router is None or path.func_accepts:
                return  # a router that takes a config or a runtime: left to LangGraph
            fused = RunnableCallable(
                _write_and_route, trace=False, recurse=False, name="write_and_route",
                writes=writes.func, finish=spec._finish, router=router,
                reader=branch.kwargs["reader"], writer=branch.kwargs["writer"],
            )  # fmt: skip
            # the branch's ends, which drawing the graph reads off its writers
            ChannelWrite.register_writer(fused, getattr(branch, "_is_channel_writer", None))
            pregel_node.writers = [fused]
            for cached in ("flat_writers", "node"):  # computed from the writers on first use
                pregel_node.__dict__.pop(cached, None)


def _write_and_route(
    input: Any,
    config: RunnableConfig,
    *,
    writes: Callable[[Any, RunnableConfig], Any],
    finish: Callable[..., Any],
    router: Callable[[Any], Any],
    reader: Callable[[RunnableConfig], Any],
    writer: Callable[..., Any],
) -> Any:
    """A node's writes, then its router on the state they made, as ``BranchSpec._route``."""
    writes(input, config)
    return finish(writer, input, router(reader(config)), config)


def _fresh_read(
    config: RunnableConfig, *, select: Sequence[str], mapper: Callable[[Any], Any] | None
) -> Any:
    """``select``'s channels with this task's writes applied, as ``local_read`` reads them."""
    read = config["configurable"][CONFIG_KEY_READ]
    if not (isinstance(read, partial) and read.func is local_read and len(read.args) == 4):
        values = read(list(select), True)  # a shape this code does not know: LangGraph's own
        return mapper(values) if mapper else values
    scratchpad, channels, managed, task = read.args
    values = {}
    for key in select:
        if key in managed:
            values[key] = managed[key].get(scratchpad)
            continue
        channel = channels[key]
        written = [value for name, value in task.writes if name == key]
        if written:  # a copy with the writes applied; one the node left alone is read as is
            channel = channel.copy()
            channel.update(written)
        if channel.is_available():
            values[key] = channel.get()
    return mapper(values) if mapper else values
