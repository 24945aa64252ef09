"""Values as a program sees them, as JSON: what the harness compares between constructors.

A message keeps what a user or a chat UI reads of it (type, text, calls, the call it answers,
status, artifact); an object keeps its class's name, so a ``Document`` revived as a dict, or a
dataclass answered as a dict, is a difference; ids are kept, the harness renumbers them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pydantic import BaseModel


def _message(message: BaseMessage) -> dict[str, Any]:
    seen: dict[str, Any] = {"type": message.type, "content": describe(message.content)}
    if message.name:
        seen["name"] = message.name
    if isinstance(message, AIMessage):
        seen["tool_calls"] = [
            {"name": call["name"], "args": describe(call["args"]), "id": call["id"]}
            for call in message.tool_calls
        ]
        if "refusal" in message.additional_kwargs:
            seen["refusal"] = message.additional_kwargs["refusal"]
    if isinstance(message, ToolMessage):
        seen["tool_call_id"] = message.tool_call_id
        seen["status"] = message.status
        if message.artifact is not None:
            seen["artifact"] = describe(message.artifact)
    return seen


def _object(value: Any) -> dict[str, Any]:
    if isinstance(value, Document):
        fields = {"metadata": describe(value.metadata), "page_content": value.page_content}
    elif isinstance(value, BaseModel):
        fields = describe(value.model_dump())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = describe(dataclasses.asdict(value))
    elif hasattr(value, "value") and type(value).__name__ == "Interrupt":
        fields = {"value": describe(value.value)}
    else:
        fields = {"repr": repr(value)}
    return {"__type__": type(value).__name__, **fields}


def describe(value: Any) -> Any:
    """``value`` as plain JSON, each object under its class's name."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, BaseMessage):
        return _message(value)
    if isinstance(value, dict):
        return {str(key): describe(item) for key, item in value.items()}
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], BaseMessage):
        # stream_mode="messages": (message, metadata); of the metadata, the node a UI shows
        return [describe(value[0]), {"node": value[1].get("langgraph_node")}]
    if isinstance(value, list | tuple):
        return [describe(item) for item in value]
    return _object(value)
