"""What a tool is given besides the model's arguments, as ``create_agent`` gives it:
``ToolRuntime`` (state, context, store, stream writer, tool call id, config), ``InjectedState``,
``InjectedStore`` and ``InjectedToolCallId``.

Injected arguments are no part of the call the gate decided on: the model never sees them (tool
schemas are the tools' ``tool_call_schema``), and the allowlist, loop keys, approval questions,
idempotency keys and traces hold the model's arguments only. They are filled here, in execute,
by the machinery of LangGraph's ``ToolNode`` (the node ``create_agent`` runs tools in), just
before the call runs. Tools without any never come here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode, ToolRuntime

from gated_react._engine.langgraph_internals import (
    injected_keys,
    injected_tool_call,
    runtime_of,
    tool_state,
)


@dataclass(frozen=True, slots=True)
class Injector:
    """The tools that take injected arguments, and ToolNode's record of which ones."""

    node: ToolNode
    takes: frozenset[str]
    """The tools to invoke with a full ``ToolCall``: those with an injected argument other
    than the ``idempotency_key`` execute passes itself."""

    @classmethod
    def of(cls, tools: Mapping[str, BaseTool], own: str) -> Injector | None:
        """None when no tool takes an injected argument (execute then pays nothing)."""
        node = ToolNode(list(tools.values()))
        takes = frozenset(name for name in tools if injected_keys(node, name) - {own})
        return cls(node, takes) if takes else None

    def tool_call(
        self, name: str, args: dict[str, Any], call_id: str, config: RunnableConfig
    ) -> ToolCall:
        """The full ``ToolCall`` a tool is invoked with: the model's arguments and the
        injected ones, under ``call_id``, the model's id for the call (stored with it, so
        the same after a resume)."""
        call = ToolCall(name=name, args=args, id=call_id, type="tool_call")
        given = tool_runtime(self.node, call, config)
        filled: ToolCall = injected_tool_call(self.node, call, given)
        return filled


def tool_runtime(node: ToolNode | None, call: ToolCall, config: RunnableConfig) -> ToolRuntime:
    """The ``ToolRuntime`` ``create_agent`` gives a tool (and a ``wrap_tool_call`` hook) for
    ``call``: the graph's state as ToolNode reads it (none without a ToolNode), context, store,
    stream writer, the call's id and config."""
    runtime = runtime_of(config)
    return ToolRuntime(
        state=tool_state(node, call, config) if node is not None else {"messages": []},
        tool_call_id=call["id"],
        config=config,
        context=runtime.context,
        store=runtime.store,
        stream_writer=runtime.stream_writer,
        tools=list(node.tools_by_name.values()) if node is not None else [],
        execution_info=runtime.execution_info,
        server_info=runtime.server_info,
    )
