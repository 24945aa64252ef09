"""A run's result as ``gated_react.run`` gives it, for tests that drive a graph with ``invoke``:
invoke returns the conversation and the stop; the answer, history, trace and usage are read
from the run's conversation and record (``gated_react.result_of``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from gated_react import result_of
from gated_react.runs import aresult_of, arun_book, config_for, from_snapshot, run_book, saver_of
from gated_react.state import Extension, ThreadResult


def invoked(
    graph: Any, value: Any, config: RunnableConfig | None = None, **kw: Any
) -> ThreadResult:
    """``graph.invoke(value, config)``, with what its run's record says."""
    return result_of(graph, graph.invoke(value, config, **kw), config)


async def ainvoked(
    graph: Any, value: Any, config: RunnableConfig | None = None, **kw: Any
) -> ThreadResult:
    """``graph.ainvoke(value, config)``, with what its run's record says (read as an async
    saver's records are read)."""
    return await aresult_of(graph, await graph.ainvoke(value, config, **kw), config)


async def aread(graph: Any, thread_id: str) -> ThreadResult:
    """``gated_react.read`` for a graph whose checkpointer is async: the stored thread."""
    snapshot = await graph.aget_state(config_for(thread_id))
    return from_snapshot(snapshot, thread_id, await arun_book(saver_of(graph), thread_id))


def extensions(graph: Any, thread_id: str) -> list[Extension]:
    """The budgets a human extended in the thread's latest run, as its record holds them."""
    return list(run_book(saver_of(graph), thread_id).tally.extensions)


def answered_once(messages: Sequence[BaseMessage]) -> bool:
    """Every tool call id has exactly one ToolMessage after it, and every ToolMessage a call."""
    open_ids: list[str] = []
    for message in messages:
        if isinstance(message, AIMessage):
            open_ids += [str(c["id"]) for c in message.tool_calls]
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in open_ids:
                return False
            open_ids.remove(message.tool_call_id)
    return not open_ids
