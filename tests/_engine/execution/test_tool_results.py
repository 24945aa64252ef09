"""A tool's result as the run keeps it: content blocks go to the model as blocks while the
history keeps their bounded text, and a ``ToolMessage``'s artifact stays in the conversation,
as under ``create_agent``."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool

from gated_react import Policy, build_graph
from gated_react._engine.execution.tool_results import is_blocks, outcome
from gated_react.testing import ScriptedChatModel, call

from ...support.results import ainvoked, invoked

PIXEL = "iVBORw0KGgo="
IMAGE = {"type": "image", "base64": PIXEL, "mime_type": "image/png"}


@tool
def screenshot(url: str) -> list[dict[str, Any]]:
    """A screenshot of a page."""
    return [{"type": "text", "text": f"screenshot of {url}"}, IMAGE]


@tool(response_format="content_and_artifact")
def retrieve(query: str) -> tuple[str, dict[str, Any]]:
    """Retrieve documents."""
    return "2 documents found", {"doc_ids": [11, 12]}


@tool
def answered(query: str, call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
    """Answers with a ToolMessage of its own."""
    return ToolMessage("1 row", artifact={"rows": [[1]]}, tool_call_id=call_id)


def test_blocks_are_shown_as_blocks_and_kept_as_their_text() -> None:
    blocks = [{"type": "text", "text": "key=sk-opaque-1234 " + "x" * 50}, IMAGE]
    kept = outcome(blocks, 20, ("sk-opaque-1234",))
    assert kept.content is not None
    text, image = kept.content
    assert text["text"].startswith("key=*** xxxx")
    assert "...[cut: " in text["text"]
    assert image == IMAGE  # an image cannot be cut: it goes whole
    assert kept.text.startswith("key=*** xxxx")  # what the history keeps of them
    assert "sk-opaque" not in kept.text
    assert kept.text.endswith("[image image/png]")
    assert PIXEL not in kept.text


def test_what_is_not_blocks_is_an_observation_as_before() -> None:
    for value in ([], ["a", "b"], [{"type": "row", "id": 1}], {"type": "text"}, "text"):
        assert not is_blocks(value)
        shown = outcome(value, 100).content
        assert isinstance(shown, str)  # text: data as JSON
        assert shown == outcome(value, 100).text
    assert outcome([{"id": 1}], 100).content == '[{"id": 1}]'
    message = ToolMessage("ok", artifact={"n": 1}, tool_call_id="c")
    assert (outcome(message, 100).content, outcome(message, 100).artifact) == ("ok", {"n": 1})


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_a_tool_result_in_blocks_reaches_the_model_as_blocks(use_async: bool) -> None:
    """Before, a JSON string: the model read base64 text instead of an image."""
    model = ScriptedChatModel(replies=[call("screenshot", url="a.com"), "Looks fine.", "Same."])
    graph = build_graph(model, [screenshot])
    given = {"messages": [HumanMessage("check the page")]}
    out = asyncio.run(ainvoked(graph, given)) if use_async else invoked(graph, given)
    assert out["stop_reason"] == "success", out["message"]
    sent = [m for m in model.requests[1] if isinstance(m, ToolMessage)]
    assert [b["type"] for b in sent[0].content] == ["text", "image"]  # type: ignore[index]
    stored = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert stored[0].content == sent[0].content
    assert out["history"][0]["observation"] == "screenshot of a.com\n[image image/png]"
    again = {"messages": [*out["messages"], HumanMessage("and now?")]}
    graph.invoke(again)  # a later turn shows the image again, as this one did
    assert [m for m in model.requests[2] if isinstance(m, ToolMessage)] == sent


def test_a_text_protocol_shows_the_blocks_beside_the_observation() -> None:
    model = ScriptedChatModel(
        replies=[
            '{"kind": "tool", "name": "screenshot", "args": {"url": "a.com"}}',
            '{"kind": "final", "answer": "Looks fine."}',
        ]
    )
    out = build_graph(model, [screenshot], policy=Policy(protocol="json")).invoke({"goal": "g"})
    assert out["stop_reason"] == "success", out["message"]
    turn = model.requests[1][-1]
    assert turn.content == [
        {"type": "text", "text": "Observation: screenshot of a.com\n[image image/png]"},
        IMAGE,
    ]


@pytest.mark.parametrize("tools", [[retrieve], [answered]], ids=["content_and_artifact", "own"])
def test_a_tool_messages_artifact_stays_in_the_conversation(tools: list[Any]) -> None:
    """Before, the stored ``ToolMessage`` had ``artifact=None``. The model sees the content."""
    name = tools[0].name
    model = ScriptedChatModel(replies=[call(name, query="refunds"), "Done."])
    out = build_graph(model, tools).invoke({"messages": [HumanMessage("find refund docs")]})
    assert out["stop_reason"] == "success", out["message"]
    stored = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    want = {"retrieve": ("2 documents found", {"doc_ids": [11, 12]})}
    assert (stored.content, stored.artifact) == want.get(name, ("1 row", {"rows": [[1]]}))
    sent = next(m for m in model.requests[1] if isinstance(m, ToolMessage))
    assert (sent.content, sent.artifact) == (stored.content, None)
