"""The floor as wide as gated-react: the five trivial nodes of ``benchmarks/floor.py``, writing
the channels gated-react's nodes write in a tool step (14 writes, values of the same shapes
and sizes) and routed by four routers as its graph is. What it costs above the floor is what
LangGraph charges for the width alone, before any node does its work
(``benchmarks.attribution``).

A tool step of gated-react writes: decide ``reply``, ``usage``, ``spend``; validate ``action``,
``messages``; gate ``calls``, ``usage``, ``seen``; execute ``calls``, ``usage``; observe
``trace``, ``calls``, ``messages``, ``history``.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph

from benchmarks import floor
from gated_react._engine.langgraph_internals import fuse_routes
from gated_react.state.conversation import add_messages_fast

_append = floor._append


class WideState(TypedDict, total=False):
    goal: str
    reply: dict[str, Any] | None
    observation: str | None
    answer: str | None
    action: dict[str, Any] | None
    calls: list[dict[str, Any]]
    usage: dict[str, Any]
    stop_reason: str | None
    spend: Annotated[list[float | None], DeltaChannel(_append)]
    seen: Annotated[list[str], DeltaChannel(_append)]
    history: Annotated[list[dict[str, Any]], DeltaChannel(_append)]
    trace: Annotated[list[dict[str, Any]], DeltaChannel(_append)]
    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_fast)]


class Route(TypedDict, total=False):
    stop_reason: str | None
    answer: str | None


def _usage(state: WideState) -> dict[str, Any]:
    """A ``Usage`` as gated-react dumps it, one step on."""
    steps = len(state.get("history", [])) + 1
    return {
        "steps": steps,
        "tool_calls": steps,
        "per_tool": {"lookup": steps},
        "tokens": 30 * steps,
        "estimated_tokens": 0,
        "cached_tokens": 0,
        "input_tokens": 20 * steps,
        "output_tokens": 10 * steps,
        "cost": 0.0,
        "unpriced": None,
        "seconds": 0.001 * steps,
    }


def _call(state: WideState, outcome: dict[str, Any] | None = None) -> dict[str, Any]:
    call = (state["reply"] or {})["tool_calls"][0]
    step = len(state.get("history", [])) + 1
    key = f"{step:024d}"
    return {"step": step, "tool": call["name"], "args": call["args"], "key": key,
            "id": call["id"], "outcome": outcome}  # fmt: skip


def _decide(state: WideState, *, model: BaseChatModel) -> dict[str, Any]:
    return floor._decide(state, model=model) | {"usage": _usage(state), "spend": [0.0]}


async def _adecide(state: WideState, *, model: BaseChatModel) -> dict[str, Any]:
    return await floor._adecide(state, model=model) | {"usage": _usage(state), "spend": [0.0]}


def _validate(state: WideState) -> dict[str, Any]:
    reply = state["reply"] or {}
    if not reply.get("tool_calls"):
        return {"answer": reply.get("text", "")}
    calls = [{**c, "type": "tool_call"} for c in reply["tool_calls"]]
    message = AIMessage("", tool_calls=calls, id=f"ai-{len(state.get('history', []))}")
    return {"action": {"kind": "tools", "calls": reply["tool_calls"]}, "messages": [message]}


def _gate(state: WideState) -> dict[str, Any]:
    key = "lookup:0a1b2c3d4e5f:0a1b2c3d4e5f"
    return {"calls": [_call(state)], "usage": _usage(state), "seen": [key]}


def _execute(state: WideState, *, tool: BaseTool) -> dict[str, Any]:
    done = floor._execute(state, tool=tool)
    outcome = {"ok": True, "observation": done["observation"], "error": None, "by_human": False}
    return done | {"calls": [_call(state, outcome)], "usage": _usage(state)}


async def _aexecute(state: WideState, *, tool: BaseTool) -> dict[str, Any]:
    done = await floor._aexecute(state, tool=tool)
    outcome = {"ok": True, "observation": done["observation"], "error": None, "by_human": False}
    return done | {"calls": [_call(state, outcome)], "usage": _usage(state)}


def _observe(state: WideState) -> dict[str, Any]:
    call = _call(state)
    entry = {"step": call["step"], "tool": call["tool"], "args_hash": "0a1b2c3d4e5f", "ok": True}
    answer = ToolMessage(state["observation"] or "", tool_call_id=call["id"], id=f"t-{call['id']}")
    return floor._observe(state) | {"trace": [entry], "calls": [], "messages": [answer]}


def _after_decide(state: Route) -> Literal["validate", "__end__"]:
    return "__end__" if state.get("stop_reason") else "validate"


def _after_validate(state: Route) -> Literal["gate", "__end__"]:
    return "__end__" if state.get("answer") is not None else "gate"


def _after_gate(state: Route) -> Literal["execute", "__end__"]:
    return "__end__" if state.get("stop_reason") else "execute"


def _after_observe(state: Route) -> Literal["decide", "__end__"]:
    return "__end__" if state.get("stop_reason") else "decide"


def wide_floor_graph(model: BaseChatModel, tool: BaseTool, checkpointer: Any = None) -> Any:
    """The wide floor, compiled with ``checkpointer``; its input is ``{"goal": ...}``."""
    u = floor._untraced
    graph = StateGraph(WideState)
    floor.add_nodes(graph, sys.modules[__name__], model, tool)
    graph.add_edge(START, "decide")
    graph.add_conditional_edges("decide", u(_after_decide), ["validate", END])
    graph.add_conditional_edges("validate", u(_after_validate), ["gate", END])
    graph.add_conditional_edges("gate", u(_after_gate), ["execute", END])
    graph.add_edge("execute", "observe")
    graph.add_conditional_edges("observe", u(_after_observe), ["decide", END])
    return fuse_routes(graph.compile(checkpointer=checkpointer, name="wide-floor"))


EXTRA = 10
"""Channels the priced floors add to the floor's: enough for their price to stand out of the
noise of one count."""

_EXTRA_KEYS = tuple(f"extra_{i}" for i in range(EXTRA))
PricedState = TypedDict(  # the floor's fields and EXTRA more
    "PricedState",
    {**floor.FloorState.__annotations__, **dict.fromkeys(_EXTRA_KEYS, int | None)},  # type: ignore[misc]
    total=False,
)


class _Priced:
    """The floor's bodies; decide also writes the extra channels, on the first step only (a
    channel that lives the whole run) or on every step (a write each step as well)."""

    def __init__(self, every_step: bool) -> None:
        self.every_step = every_step
        self._validate, self._gate = floor._validate, floor._gate
        self._execute, self._aexecute = floor._execute, floor._aexecute
        self._observe = floor._observe

    def _decide(self, state: dict[str, Any], *, model: BaseChatModel) -> dict[str, Any]:
        return self._extra(state) | floor._decide(state, model=model)  # type: ignore[arg-type]

    async def _adecide(self, state: dict[str, Any], *, model: BaseChatModel) -> dict[str, Any]:
        return self._extra(state) | await floor._adecide(state, model=model)  # type: ignore[arg-type]

    def _extra(self, state: dict[str, Any]) -> dict[str, Any]:
        step = len(state.get("history", []))
        return dict.fromkeys(_EXTRA_KEYS, step) if self.every_step or not step else {}


def priced_floor_graph(
    model: BaseChatModel, tool: BaseTool, checkpointer: Any = None, *, every_step: bool
) -> Any:
    """The floor with ``EXTRA`` more channels: what LangGraph charges a step for a channel that
    holds a value (``every_step=False``) and, on top, for a write (``every_step=True``)."""
    bodies = _Priced(every_step)
    return floor.floor_graph(model, tool, checkpointer, schema=PricedState, bodies=bodies)


def floor_peer(peer: str, model: BaseChatModel, tool: BaseTool, checkpointer: Any = None) -> Any:
    """The floor (``floor``) or one of its variants, by its benchmark name."""
    if peer == "wide_floor":
        return wide_floor_graph(model, tool, checkpointer)
    if peer in ("floor_channels", "floor_writes"):
        every_step = peer == "floor_writes"
        return priced_floor_graph(model, tool, checkpointer, every_step=every_step)
    return floor.floor_graph(model, tool, checkpointer)
