"""The conversation as ``messages`` holds it, as ``create_agent`` stores it: what chat clients draw
and what a later turn sends back to a model.

Each step is an ``AIMessage`` with the step's tool calls (written by ``validate``, before the
gate may pause on a question, so a waiting call is always the last message), then one
``ToolMessage`` per call (``observe``; for calls that never ran, whichever node ended the run
says why, ``status="error"``). Every tool call id is answered: the history is valid input to
any OpenAI-compatible API.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from gated_react.state import Call, Reply, ToolAction, ToolCalls, tool_actions


def call_id(message_id: str, index: int) -> str:
    """A stable id for a call the model gave none (JSON and text protocols, some servers): made
    from its reply's id and its place, short enough for every API (OpenAI takes 40 chars)."""
    return "call_" + hashlib.sha256(f"{message_id}:{index}".encode()).hexdigest()[:24]


def with_ids(action: Any, reply: Reply) -> tuple[Any, str]:
    """The action with an id on every call (the model's, else a stable one), and the id of the
    message that holds them (the reply's, else a new one)."""
    message_id = reply.id or str(uuid.uuid4())
    actions = tool_actions(action)
    if not actions:
        return action, message_id
    given = [call.get("id") for call in reply.tool_calls]
    named = [
        a.model_copy(
            update={"id": (given[i] if i < len(given) else None) or call_id(message_id, i)}
        )
        for i, a in enumerate(actions)
    ]
    if isinstance(action, ToolCalls):
        return action.model_copy(update={"calls": named}), message_id
    return named[0], message_id


def proposed(actions: Iterable[ToolAction], text: str, message_id: str) -> AIMessage:
    """The AI message of a step: the text the model wrote with its calls, and the calls."""
    calls = [{"name": a.name, "args": a.args, "id": a.id, "type": "tool_call"} for a in actions]
    return AIMessage(text, tool_calls=calls, id=message_id)


def said(text: str, message_id: str | None = None) -> AIMessage:
    """An AI message of text alone (an answer, or what the model wrote as it streamed)."""
    return AIMessage(text, id=message_id or str(uuid.uuid4()))


def result(
    tool: str, tool_call_id: str | None, content: str | list[Any], *, ok: bool, artifact: Any = None
) -> ToolMessage:
    """The answer to one tool call: its result (text, or content blocks) and any artifact, or
    (``status="error"``) why it has none."""
    return ToolMessage(
        content,
        tool_call_id=tool_call_id or "",
        name=tool,
        status="success" if ok else "error",
        artifact=artifact,
        id=str(uuid.uuid4()),
    )


def not_run(actions: Iterable[ToolAction | Call], why: str) -> list[ToolMessage]:
    """Error results for calls that never ran, each saying why (a call recorded before calls
    had ids is in no message: nothing to answer)."""
    out = []
    for a in actions:
        name = a.name if isinstance(a, ToolAction) else a.tool
        if a.id is not None:
            out.append(result(name, a.id, why, ok=False))
    return out
