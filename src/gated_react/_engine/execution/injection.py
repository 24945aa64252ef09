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

from collections.abc import Callable, Mapping
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
    with_runtime,
)
from gated_react.redact import masked_in


@dataclass(frozen=True, slots=True)
class Injector:
    """The tools that take injected arguments, and ToolNode's record of which ones."""

    node: ToolNode
    takes: frozenset[str]
    """The tools to invoke with a full ``ToolCall``: those with an injected argument other
    than the ``idempotency_key`` execute passes itself."""
    shown: Shown

    @classmethod
    def of(cls, tools: Mapping[str, BaseTool], own: str, shown: Shown) -> Injector | None:
        """None when no tool takes an injected argument (execute then pays nothing)."""
        node = ToolNode(list(tools.values()))
        takes = frozenset(name for name in tools if injected_keys(node, name) - {own})
        return cls(node, takes, shown) if takes else None

    def tool_call(
        self, name: str, args: dict[str, Any], call_id: str, config: RunnableConfig
    ) -> ToolCall:
        """The full ``ToolCall`` a tool is invoked with: the model's arguments and the
        injected ones, under ``call_id``, the model's id for the call (stored with it, so
        the same after a resume)."""
        call = ToolCall(name=name, args=args, id=call_id, type="tool_call")
        given = tool_runtime(self.node, call, config, self.shown)
        filled: ToolCall = injected_tool_call(self.node, call, given)
        return filled


@dataclass(frozen=True, slots=True)
class Shown:
    """What a tool is shown of the agent besides its call: the tools the policy allows (the
    others are no concern of a tool), and the keys its stream writer masks."""

    tools: tuple[BaseTool, ...] = ()
    secrets: tuple[str, ...] = ()


def tool_runtime(
    node: ToolNode | None, call: ToolCall, config: RunnableConfig, shown: Shown
) -> ToolRuntime:
    """The ``ToolRuntime`` ``create_agent`` gives a tool (and a ``wrap_tool_call`` hook) for
    ``call``: the graph's state as ToolNode reads it (a copy: a tool that changes it changes
    nothing the graph holds; none without a ToolNode), context, store, a stream writer that
    masks the model's keys, the tools the policy allows, the call's id and config."""
    runtime = runtime_of(config)
    state = tool_state(node, call, config) if node is not None else {"messages": []}
    return ToolRuntime(
        state=shown_state(state),
        tool_call_id=call["id"],
        config=config,
        context=runtime.context,
        store=runtime.store,
        stream_writer=_masking(runtime.stream_writer, shown.secrets),
        tools=list(shown.tools),
        execution_info=runtime.execution_info,
        server_info=runtime.server_info,
    )


def shown_state(state: Any) -> Any:
    """The state as a tool is shown it, as ``create_agent``'s: the conversation, the run's
    end and the app's fields, each list and dict copied (its items are the channel's); the
    gate's step in hand and the raw input are no tool's concern."""
    if not isinstance(state, dict):
        return state
    return {
        key: list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict)
        else value
        for key, value in state.items()
        if key not in ("step", "goal")
    }  # fmt: skip


def masked_config(config: RunnableConfig, secrets: tuple[str, ...]) -> RunnableConfig:
    """``config`` for a tool's invocation: its runtime's stream writer masks the model's keys,
    so what a tool streams through ``get_stream_writer()`` is masked as its ``ToolRuntime``'s
    writer is (``custom`` mode)."""
    if not secrets:
        return config
    runtime = runtime_of(config)
    writer = _masking(runtime.stream_writer, secrets)
    return with_runtime(config, runtime.override(stream_writer=writer))


@dataclass(frozen=True, slots=True)
class _Masking:
    """A stream writer masking the model's keys in whatever a tool streams (``custom`` mode)."""

    writer: Callable[[Any], None]
    secrets: tuple[str, ...]

    def __call__(self, chunk: Any) -> None:
        self.writer(masked_in(chunk, self.secrets))


def _masking(writer: Callable[[Any], None], secrets: tuple[str, ...]) -> Callable[[Any], None]:
    """``writer``, masking ``secrets``; as it is when it masks them already (execute's config
    carries a masking writer, and the ``ToolRuntime`` built from it must not mask twice)."""
    if not secrets or (isinstance(writer, _Masking) and writer.secrets == secrets):
        return writer
    return _Masking(writer, secrets)
