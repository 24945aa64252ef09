"""The floor: a bare five-node LangGraph loop, what any five-superstep ReAct graph costs.

decide -> validate -> gate -> execute -> observe -> decide, as gated-react's graph, with trivial
nodes: decide calls ``model.invoke`` on a message list (a system line, the goal with the earlier
steps counted as gated-react folds them, and the last step: built in constant time, since
building a transcript is node logic, not the framework's; the scripted model's cost does not
depend on the list's length), execute calls ``tool.invoke`` (``ainvoke`` under ``ainvoke``) on
the call's args, observe appends the step to an append-only log. Each node writes one small
channel; the state is a TypedDict, so no node validates anything. Compiled with the
checkpointer it is given, it is run with the same durability as the other runtimes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool
from langgraph._internal._runnable import RunnableCallable
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph


def _append(current: list[Any] | None, writes: Sequence[list[Any]]) -> list[Any]:
    out = list(current or ())
    for batch in writes:
        out.extend(batch)
    return out


class FloorState(TypedDict, total=False):
    goal: str
    reply: dict[str, Any] | None
    observation: str | None
    history: Annotated[list[dict[str, Any]], DeltaChannel(_append)]
    answer: str | None


def _prompt(state: FloorState) -> list[BaseMessage]:
    history = state.get("history", [])
    goal = state["goal"]
    if len(history) > 1:  # the earlier steps, counted as gated-react folds them
        goal += f"\n- steps 1-{len(history) - 1}: lookup x{len(history) - 1}"
    messages: list[BaseMessage] = [SystemMessage("Call tools, then answer."), HumanMessage(goal)]
    for entry in history[-1:]:
        call = {"name": entry["tool"], "args": entry["args"], "id": entry["id"]}
        messages += [
            AIMessage("", tool_calls=[call]),
            ToolMessage(entry["observation"], tool_call_id=entry["id"]),
        ]
    return messages


def _replied(reply: Any) -> dict[str, Any]:
    calls = [{"name": c["name"], "args": c["args"], "id": c["id"]} for c in reply.tool_calls]
    return {"reply": {"text": reply.text, "tool_calls": calls}}


def _decide(state: FloorState, *, model: BaseChatModel) -> dict[str, Any]:
    return _replied(model.invoke(_prompt(state)))


async def _adecide(state: FloorState, *, model: BaseChatModel) -> dict[str, Any]:
    return _replied(await model.ainvoke(_prompt(state)))


def _validate(state: FloorState) -> dict[str, Any]:
    reply = state["reply"] or {}
    return {} if reply.get("tool_calls") else {"answer": reply.get("text", "")}


def _after_validate(state: FloorState) -> Literal["gate", "__end__"]:
    return END if state.get("answer") is not None else "gate"


def _gate(state: FloorState) -> dict[str, Any]:
    return {}


def _execute(state: FloorState, *, tool: BaseTool) -> dict[str, Any]:
    call = (state["reply"] or {})["tool_calls"][0]
    return {"observation": str(tool.invoke(call["args"]))}


async def _aexecute(state: FloorState, *, tool: BaseTool) -> dict[str, Any]:
    call = (state["reply"] or {})["tool_calls"][0]
    return {"observation": str(await tool.ainvoke(call["args"]))}


def _observe(state: FloorState) -> dict[str, Any]:
    call = (state["reply"] or {})["tool_calls"][0]
    entry = {"tool": call["name"], "args": call["args"], "id": call["id"]}
    return {"history": [{**entry, "observation": state["observation"]}]}


def _untraced(func: Any, afunc: Any = None, **bound: Any) -> RunnableCallable:
    """As create_agent and gated-react build their nodes and routers: no traced child runs."""
    return RunnableCallable(func, afunc, trace=False, **bound)


def add_nodes(graph: Any, bodies: ModuleType | Any, model: BaseChatModel, tool: BaseTool) -> None:
    """The five nodes from the bodies a module (or an object) names ``_decide``, ``_adecide``,
    ``_validate``, ``_gate``, ``_execute``, ``_aexecute`` and ``_observe`` (looked up now, so a
    benchmark may replace one before the graph is built)."""
    for name in ("decide", "validate", "gate", "execute", "observe"):
        body, abody = getattr(bodies, f"_{name}"), getattr(bodies, f"_a{name}", None)
        bound = {"decide": {"model": model}, "execute": {"tool": tool}}.get(name, {})
        graph.add_node(name, _untraced(body, abody, **bound))


def floor_graph(
    model: BaseChatModel,
    tool: BaseTool,
    checkpointer: Any = None,
    *,
    schema: type = FloorState,
    bodies: Any = None,
) -> Any:
    """The five-node loop, compiled with ``checkpointer``; its input is ``{"goal": ...}``.
    ``schema`` and ``bodies`` replace the state and the nodes (``benchmarks.wide_floor``)."""
    graph = StateGraph(schema)
    add_nodes(graph, bodies or sys.modules[__name__], model, tool)
    graph.add_edge(START, "decide")
    graph.add_edge("decide", "validate")
    graph.add_conditional_edges("validate", _untraced(_after_validate), ["gate", END])
    graph.add_edge("gate", "execute")
    graph.add_edge("execute", "observe")
    graph.add_edge("observe", "decide")
    return graph.compile(checkpointer=checkpointer, name="floor")
