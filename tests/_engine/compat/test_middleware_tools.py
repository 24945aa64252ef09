"""A gated call under ``wrap_tool_call`` hooks: the request the hooks see is the call
``create_agent``'s ``ToolNode`` would hand them."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from gated_react import build_graph

from ...support.middleware_fakes import FakeToolModel, replies


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class Ids(AgentMiddleware):
    """Keeps the id of each request and of the message the handler returns."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        message = handler(request)
        self.seen.append((request.tool_call["id"], message.tool_call_id))
        return message

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        message = await handler(request)
        self.seen.append((request.tool_call["id"], message.tool_call_id))
        return message


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_a_tool_hook_sees_the_models_call_id(use_async: bool) -> None:
    """The id the stored ``ToolMessage`` answers (before, the call's idempotency key)."""
    ids, call_id = Ids(), f"call_{uuid.uuid4().hex[:8]}"  # the model's own id, this run's
    asked = AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": call_id}])
    model = FakeToolModel(messages=replies(asked, "Done."))
    graph = build_graph(model, [lookup], middleware=[ids])
    given = {"messages": [{"role": "user", "content": "q"}]}
    out = asyncio.run(graph.ainvoke(given)) if use_async else graph.invoke(given)
    assert out["stop_reason"] == "success", out["message"]
    assert ids.seen == [(call_id, call_id)]
    answered = [m.tool_call_id for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answered == [call_id]


@tool(response_format="content_and_artifact")
def retrieve(query: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Retrieve a page as text and an image, with its ids."""
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    return [{"type": "text", "text": f"page for {query}"}, image], {"ids": [3]}


class Seen(AgentMiddleware):
    """Keeps the message the tool's handler returned."""

    def __init__(self) -> None:
        self.seen: list[ToolMessage] = []

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.seen.append(handler(request))
        return self.seen[-1]


def test_a_tool_hook_gets_the_blocks_and_artifact_and_passes_them_on() -> None:
    """As ``ToolNode`` hands them to a hook; before, a JSON string and no artifact."""
    seen = Seen()
    call_id = f"c1_{uuid.uuid4().hex[:8]}"
    asked = AIMessage("", tool_calls=[{"name": "retrieve", "args": {"query": "x"}, "id": call_id}])
    model = FakeToolModel(messages=replies(asked, "Done."))
    out = build_graph(model, [retrieve], middleware=[seen]).invoke({"goal": "q"})
    assert out["stop_reason"] == "success", out["message"]
    stored = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert [b["type"] for b in seen.seen[0].content] == ["text", "image"]  # type: ignore[index]
    assert seen.seen[0].artifact == stored.artifact == {"ids": [3]}
    assert stored.content == seen.seen[0].content
