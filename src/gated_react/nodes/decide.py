"""decide: ask the model once for the next action.

A failing model call ends the run with a stop reason, never with an exception.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig

from gated_react.agent import Agent
from gated_react.llm_errors import classify
from gated_react.prompt import build_messages
from gated_react.state import Reply, State, dump


def decide(state: State, config: RunnableConfig, *, agent: Agent) -> dict[str, Any]:
    """Sync body: call the bound model with the bounded prompt."""
    messages = build_messages(state, agent.system, agent.policy)
    started = time.monotonic()
    try:
        message = agent.bound.invoke(messages, config)
    except Exception as exc:  # any model failure becomes a stop reason, never a traceback
        return failed(state, exc, started, agent.secrets)
    return decided(state, messages, message, started)


async def adecide(state: State, config: RunnableConfig, *, agent: Agent) -> dict[str, Any]:
    """Async body: the same, awaiting the model."""
    messages = build_messages(state, agent.system, agent.policy)
    started = time.monotonic()
    try:
        message = await agent.bound.ainvoke(messages, config)
    except Exception as exc:
        return failed(state, exc, started, agent.secrets)
    return decided(state, messages, message, started)


def decided(
    state: State, messages: list[BaseMessage], message: BaseMessage, started: float
) -> dict[str, Any]:
    """The update after a reply: the raw reply and the budget it used."""
    usage = state.usage.model_copy(
        update={
            "steps": state.usage.steps + 1,
            "tokens": state.usage.tokens + _tokens(messages, message),
            "seconds": state.usage.seconds + (time.monotonic() - started),
        }
    )
    reply = Reply(
        text=message.text if isinstance(message.text, str) else str(message.content),
        tool_calls=[
            {"name": c["name"], "args": c["args"]} for c in getattr(message, "tool_calls", [])
        ],
        invalid_tool_calls=[
            {"name": c.get("name"), "args": c.get("args"), "error": c.get("error")}
            for c in getattr(message, "invalid_tool_calls", [])
        ],
    )
    return {"reply": dump(reply), "usage": dump(usage)}


def failed(
    state: State, exc: Exception, started: float, secrets: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The update after a failed call: the step and seconds still count."""
    usage = state.usage.model_copy(
        update={
            "steps": state.usage.steps + 1,
            "seconds": state.usage.seconds + (time.monotonic() - started),
        }
    )
    return {**classify(exc, secrets).update(), "usage": dump(usage), "reply": None}


def _tokens(messages: list[BaseMessage], message: BaseMessage) -> int:
    """Tokens the model reported; an estimate when it reports none, so max_tokens still binds."""
    reported = message.usage_metadata if isinstance(message, AIMessage) else None
    if reported and reported.get("total_tokens"):
        return int(reported["total_tokens"])
    return count_tokens_approximately([*messages, message])
