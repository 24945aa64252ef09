"""The few LangGraph internals this package relies on, in one place.

LangChain's own ``create_agent`` builds its nodes with ``RunnableCallable`` for the same reason
we do: one node with a sync and an async body, and bound keyword arguments instead of closures.
``tests/_engine/test_langgraph_internals.py`` pins the behaviour of each name, so an upgrade
that changes it fails there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_RESUMING,
)
from langgraph._internal._runnable import RunnableCallable

__all__ = ["CONFIG_KEY_DURABILITY", "can_pause", "is_resuming", "node", "route"]


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
