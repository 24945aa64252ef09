"""``stream_mode="messages"`` shows a chat client each run's answer once, under the id the thread's
``messages`` keeps: token by token with native tool calling, whole from ``finish`` with the json
and text protocols, never a tool-call chunk or raw protocol syntax; the steps' calls and
results whole, as the nodes store them. Before: the answer streamed from decide under one id
and again from finish under another, and tool-call chunks streamed. A ``values`` event never
drops a message that has streamed (before: the answer vanished until ``finish``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from gated_react import Policy, build_graph
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

CONFIG: Any = {"configurable": {"thread_id": "chat"}}
ANSWER = "Anna is on the pro plan."
SCRIPTS = {
    "tools": [call("get_user_profile", user_id=42), ANSWER],
    "json": [
        '{"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}}',
        '{"kind": "final", "answer": "Anna is on the pro plan."}',
    ],
    "text": [
        'Thought: look it up\nAction: get_user_profile\nAction Input: {"user_id": 42}',
        "Thought: done\nFinal Answer: Anna is on the pro plan.",
    ],
}


def _streamed(replies: list[Any], **policy: Any) -> tuple[list[BaseMessage], list[BaseMessage]]:
    graph = build_graph(
        ScriptedChatModel(replies=replies),
        SUPPORT_TOOLS,
        policy=Policy(**policy),
        checkpointer=InMemorySaver(),
    )
    asked = {"messages": [HumanMessage("Which plan is user 42 on?")]}
    streamed = [m for m, _ in graph.stream(asked, CONFIG, stream_mode="messages")]
    return streamed, graph.get_state(CONFIG).values["messages"]


def _ai(streamed: list[BaseMessage]) -> list[BaseMessage]:
    """What streamed of the answer: AI messages without calls (those stream whole)."""
    return [m for m in streamed if m.type in ("ai", "AIMessageChunk") and not _calls(m)]


def _calls(message: Any) -> bool:
    return bool(getattr(message, "tool_calls", None) or getattr(message, "tool_call_chunks", None))


@pytest.mark.parametrize("protocol", ["tools", "json", "text"])
def test_every_message_streamed_is_stored_under_its_id(protocol: str) -> None:
    streamed, stored = _streamed(SCRIPTS[protocol], protocol=protocol)
    assert {m.id for m in streamed} == {m.id for m in stored[1:]}
    (proposed,) = [m for m in streamed if _calls(m)]
    assert proposed.tool_calls[0]["name"] == "get_user_profile"
    assert [m.type for m in streamed if m.type == "tool"] == ["tool"]


@pytest.mark.parametrize("protocol", ["tools", "json", "text"])
def test_a_values_event_never_drops_a_message_that_streamed(protocol: str) -> None:
    """Before: after the answer's tokens a values event held only the human message (the
    answer vanished from a chat UI until finish, 124-340 ms)."""
    model = ScriptedChatModel(replies=[*SCRIPTS[protocol], "Anna, again."])
    graph = build_graph(
        model, SUPPORT_TOOLS, policy=Policy(protocol=protocol), checkpointer=InMemorySaver()
    )
    for turn in ("Which plan is user 42 on?", "And now?"):
        asked = {"messages": [HumanMessage(turn)]}
        seen: set[str | None] = set()
        for mode, event in graph.stream(asked, CONFIG, stream_mode=["messages", "values"]):
            if mode == "messages":
                seen.add(event[0].id)
            else:
                assert seen <= {m.id for m in event["messages"]}
        assert seen  # something streamed


def test_with_native_tool_calls_the_answer_streams_token_by_token_under_its_stored_id() -> None:
    streamed, stored = _streamed(SCRIPTS["tools"])
    chunks = _ai(streamed)
    assert len(chunks) > 1  # word by word
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    assert {c.id for c in chunks} == {stored[-1].id}
    assert "".join(c.text for c in chunks) == ANSWER == stored[-1].text  # once, not twice


@pytest.mark.parametrize("protocol", ["json", "text"])
def test_with_json_and_text_the_answer_arrives_whole_without_protocol_syntax(
    protocol: str,
) -> None:
    streamed, stored = _streamed(SCRIPTS[protocol], protocol=protocol)
    (answer,) = _ai(streamed)
    assert (answer.id, answer.text) == (stored[-1].id, ANSWER)


def test_a_stop_streams_once_under_its_stored_id() -> None:
    profile = call("get_user_profile", user_id=42)
    streamed, stored = _streamed([profile, profile])
    (said,) = _ai(streamed)
    assert said.id == stored[-1].id
    assert said.text.startswith("I stopped before finishing (loop_detected)")


def test_an_answer_the_schema_rewrites_is_not_streamed_from_the_model() -> None:
    class Plan(BaseModel):
        plan: str

    streamed, stored = _streamed(['{"plan":  "pro"}'], answer_schema=Plan)
    (answer,) = _ai(streamed)
    assert (answer.id, answer.text) == (stored[-1].id, '{"plan":"pro"}')


def test_async_streams_the_same() -> None:
    graph = build_graph(
        ScriptedChatModel(replies=SCRIPTS["tools"]), SUPPORT_TOOLS, checkpointer=InMemorySaver()
    )

    async def main() -> list[BaseMessage]:
        asked = {"messages": [HumanMessage("Which plan is user 42 on?")]}
        return [m async for m, _ in graph.astream(asked, CONFIG, stream_mode="messages")]

    chunks = _ai(asyncio.run(main()))
    stored = graph.get_state(CONFIG).values["messages"]
    assert {c.id for c in chunks} == {stored[-1].id}
    assert "".join(c.text for c in chunks) == ANSWER
