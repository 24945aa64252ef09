"""The few LangGraph internals this package relies on, in one place.

LangChain's own ``create_agent`` builds its nodes with ``RunnableCallable`` for the same reason
we do: one node with a sync and an async body, and bound keyword arguments instead of closures.
``tests/_engine/test_langgraph_internals.py`` pins the behaviour of each name, so an upgrade
that changes it fails there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables import RunnableConfig
from langchain_core.tracers._streaming import _StreamingCallbackHandler
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_RESUMING,
    CONFIG_KEY_RUNTIME,
    CONFIG_KEY_SCRATCHPAD,
)
from langgraph._internal._runnable import RunnableCallable
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolNode
from langgraph.pregel._messages import StreamMessagesHandler
from langgraph.runtime import Runtime
from langgraph.types import _interrupt_id

__all__ = [
    "CONFIG_KEY_DURABILITY",
    "StreamMessagesHandler",
    "StreamingCallbackHandler",
    "acame_from_an_edit",
    "came_from_an_edit",
    "can_pause",
    "earlier_interrupt_ids",
    "emit",
    "injected_keys",
    "injected_tool_call",
    "is_resuming",
    "messages_stream",
    "node",
    "route",
    "runtime_of",
    "tool_state",
]

StreamingCallbackHandler = _StreamingCallbackHandler
"""LangChain's marker for a handler that wants tokens: a chat model called with one among its
callbacks streams (``invoke`` goes through ``_stream``), as it does under LangGraph's own."""


def node(
    func: Callable[..., Any], afunc: Callable[..., Any] | None = None, **bound: Any
) -> RunnableCallable:
    """A graph node from module-level functions with ``bound`` passed as keyword arguments.

    Without ``afunc`` the sync body also runs inline under ``ainvoke`` (no thread hop), which is
    right for the pure nodes; nodes that wait on I/O pass an async body.
    """
    return RunnableCallable(func, afunc, trace=False, **bound)


def route(router: Callable[..., Any]) -> RunnableCallable:
    """A router as an untraced runnable: a plain function would open a traced child run on every
    routing decision, which at four routers per step is most of the routing cost."""
    return RunnableCallable(router, trace=False)


def is_resuming(config: RunnableConfig) -> bool:
    """True in the first node of an invocation that continues a saved checkpoint."""
    return bool(config.get("configurable", {}).get(CONFIG_KEY_RESUMING))


def can_pause(config: RunnableConfig) -> bool:
    """True when the run has a checkpointer (its own, a parent graph's or the server's), so
    ``interrupt()`` can pause it and a later resume can answer."""
    return config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER) is not None


def messages_stream(config: RunnableConfig) -> StreamMessagesHandler | None:
    """The handler behind ``stream_mode="messages"`` in this node's callbacks, if the run is
    streamed in that mode."""
    callbacks = config.get("callbacks")
    handlers = callbacks.handlers if isinstance(callbacks, BaseCallbackManager) else callbacks
    found = (h for h in handlers or () if isinstance(h, StreamMessagesHandler))
    return next(found, None)


def emit(handler: StreamMessagesHandler, meta: Any, message: Any) -> None:
    """Send one message chunk on the messages stream, where ``meta`` (what the handler keeps
    per model call) says."""
    handler._emit(meta, message)


# Why the checkpoint a node starts from says whether the state is the graph's own: a node
# reached inside a running invocation starts from what the previous node wrote in memory; only
# the first node of an invocation (``is_resuming``) starts from a stored checkpoint, and
# LangGraph records who wrote each one in its metadata: ``loop`` (a node ran), ``update``
# (``update_state``, Studio's edit-and-continue) or ``fork`` (a copy; LangGraph also forks
# when a run is replayed from an older checkpoint id, time travel). The record is the store's
# own and the same for every process that reads it: no per-process secret is needed.


def _started_from(config: RunnableConfig) -> tuple[Any, RunnableConfig] | None:
    """The saver and the stored checkpoint this task started from (its own graph's: the last
    entry of the namespace map, parent graphs first)."""
    conf = config.get("configurable", {})
    saver, mapping = conf.get(CONFIG_KEY_CHECKPOINTER), conf.get(CONFIG_KEY_CHECKPOINT_MAP)
    if saver is None or not mapping:
        return None
    namespace, checkpoint_id = list(mapping.items())[-1]
    found = {"thread_id": conf.get("thread_id"), "checkpoint_ns": namespace}
    return saver, {"configurable": {**found, "checkpoint_id": checkpoint_id}}


def _edited(found: CheckpointTuple | None) -> bool:
    return found is None or found.metadata.get("source") != "loop"


def came_from_an_edit(config: RunnableConfig) -> bool:
    """True when this node starts from a stored checkpoint that no node wrote (an edit or a
    fork), or one that cannot be found (fail closed)."""
    if not is_resuming(config):
        return False
    started = _started_from(config)
    return started is None or _edited(started[0].get_tuple(started[1]))


async def acame_from_an_edit(config: RunnableConfig) -> bool:
    """The async twin (an async saver refuses sync reads on its loop)."""
    if not is_resuming(config):
        return False
    started = _started_from(config)
    return started is None or _edited(await started[0].aget_tuple(started[1]))


def earlier_interrupt_ids(count: int) -> list[str]:
    """The ids of the ``count`` interrupts this task raised just before the one it is about to
    raise: LangGraph numbers a task's interrupts by the answers it already has."""
    try:
        conf = get_config()["configurable"] if count > 0 else {}
    except RuntimeError:  # outside a graph (ask() called directly): no ids to keep
        return []
    scratchpad = conf.get(CONFIG_KEY_SCRATCHPAD)
    if scratchpad is None:
        return []
    slot, ns = len(scratchpad.resume), conf[CONFIG_KEY_CHECKPOINT_NS]
    return [_interrupt_id(ns, slot - k) for k in range(1, min(count, slot) + 1)]


# Tools written for create_agent: ToolNode, the node create_agent runs them in, knows which
# arguments each tool has injected (ToolRuntime, InjectedState, InjectedStore, InjectedToolArg)
# and fills them; its private helpers are reused here so the rules stay LangChain's own.


def runtime_of(config: RunnableConfig) -> Runtime[Any] | None:
    """The LangGraph runtime (context, store, stream writer) a node runs under, if any."""
    found = config.get("configurable", {}).get(CONFIG_KEY_RUNTIME)
    return found if isinstance(found, Runtime) else None


def injected_keys(tools: ToolNode, name: str) -> frozenset[str]:
    """The arguments of tool ``name`` that are injected, never the model's (ToolNode's record,
    built once when the ToolNode was)."""
    found = tools._injected_args.get(name)
    if found is None:
        return frozenset()
    named = {*found.state, found.store, found.runtime, *found.all_injected_keys}
    return frozenset(key for key in named if key)


def tool_state(tools: ToolNode, call: Any, config: RunnableConfig) -> Any:
    """The graph's state as ToolNode hands it to a tool (every channel, as stored)."""
    return tools._extract_state([call], config)


def injected_tool_call(tools: ToolNode, call: Any, runtime: Any) -> Any:
    """``call`` with its injected arguments filled and any the model forged dropped."""
    return tools._inject_tool_args(call, runtime)
