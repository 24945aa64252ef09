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
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_RESUMING,
)
from langgraph._internal._runnable import RunnableCallable
from langgraph.pregel._messages import StreamMessagesHandler

__all__ = [
    "CONFIG_KEY_DURABILITY",
    "StreamMessagesHandler",
    "StreamingCallbackHandler",
    "can_pause",
    "emit",
    "is_resuming",
    "messages_stream",
    "node",
    "route",
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
