"""``stream_mode="messages"`` shows a chat client each run's answer once, under the id the thread's
``messages`` keeps: token by token with native tool calling, whole from ``finish`` with the json
and text protocols, never a tool-call chunk or raw protocol syntax; the steps' calls and
results whole, as the nodes store them. Before: the answer streamed from decide under one id
and again from finish under another, and tool-call chunks streamed. A ``values`` event never
drops a message that has streamed (before: the answer vanished until ``finish``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGenerationChunk
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, SecretStr

from gated_react import Budget, Policy, build_graph
from gated_react._engine.conversation.streaming import release
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ...support.openai_server import FakeOpenAI, Reply, reply

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


def _orphans(streamed: list[BaseMessage]) -> list[str]:
    """Results of calls a client reading only the messages stream never saw."""
    seen: set[str] = set()
    orphans = []
    for message in streamed:
        calls = [*getattr(message, "tool_calls", ()), *getattr(message, "tool_call_chunks", ())]
        seen |= {str(c["id"]) for c in calls if c.get("id")}
        if isinstance(message, ToolMessage) and message.tool_call_id not in seen:
            orphans.append(message.tool_call_id)
    return orphans


def _check_text_then_calls(streamed: list[BaseMessage], stored: list[BaseMessage]) -> None:
    proposed = next(m for m in stored if m.type == "ai" and m.tool_calls)
    mine = [m for m in streamed if m.id == proposed.id]
    assert all(isinstance(m, AIMessageChunk) for m in mine)
    joined = mine[0]
    for chunk in mine[1:]:
        joined += chunk
    assert joined.text == proposed.text == "Let me look it up."  # the text once, not twice
    assert joined.tool_calls == proposed.tool_calls
    assert _calls(mine[-1])  # after the text
    assert not any(_calls(m) for m in mine[:-1])
    assert _orphans(streamed) == []


TEXT_THEN_CALL = AIMessage(
    "Let me look it up.",
    tool_calls=[{"name": "get_user_profile", "args": {"user_id": 42}, "id": "call_42"}],
)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_reply_with_text_and_calls_streams_its_calls_under_the_same_id(
    asynchronous: bool,
) -> None:
    """Before: only the text streamed; the message with its calls never followed (LangGraph
    sends nothing under an id it has sent), so a client reading the messages stream got a
    result for a call it had never seen."""
    graph = build_graph(
        ScriptedChatModel(replies=[TEXT_THEN_CALL, ANSWER]),
        SUPPORT_TOOLS,
        checkpointer=InMemorySaver(),
    )
    asked = {"messages": [HumanMessage("Which plan is user 42 on?")]}

    async def astreamed() -> list[BaseMessage]:
        return [m async for m, _ in graph.astream(asked, CONFIG, stream_mode="messages")]

    if asynchronous:
        streamed = asyncio.run(astreamed())
    else:
        streamed = [m for m, _ in graph.stream(asked, CONFIG, stream_mode="messages")]
    _check_text_then_calls(streamed, graph.get_state(CONFIG).values["messages"])


def test_a_reply_with_text_and_calls_streams_them_through_a_real_chatopenai() -> None:
    script = [
        Reply(content="Let me look it up.", tool_calls=[("get_user_profile", {"user_id": 42})]),
        reply(ANSWER),
    ]
    with FakeOpenAI(script) as server:
        model = ChatOpenAI(base_url=server.base_url, api_key=SecretStr("k"), model="gpt-4.1-mini")
        graph = build_graph(model, SUPPORT_TOOLS, checkpointer=InMemorySaver())
        asked = {"messages": [HumanMessage("Which plan is user 42 on?")]}
        streamed = [m for m, _ in graph.stream(asked, CONFIG, stream_mode="messages")]
    _check_text_then_calls(streamed, graph.get_state(CONFIG).values["messages"])


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
    assert said.text == stored[-1].text
    assert said.text.startswith("I was about to repeat a step I had already taken, so I stopped.")


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


KEY = "gr-live-" + "Q7" * 12


class KeyedModel(ScriptedChatModel):
    """The scripted model holding an API key (masked wherever the model's replies go), its
    replies streamed ``size`` characters at a time (0: word by word, as the script does)."""

    api_key: SecretStr
    size: int = 0

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        *words, last = super()._stream(messages, stop, run_manager, **kwargs)
        if not self.size:
            yield from [*words, last]
            return
        text = "".join(word.text for word in words)
        for at in range(0, len(text), self.size):
            yield ChatGenerationChunk(message=AIMessageChunk(content=text[at : at + self.size]))
        yield last


@pytest.mark.parametrize("size", [0, 4, 1, 7], ids=["words", "4 chars", "1 char", "7 chars"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_streamed_answer_is_masked_like_the_stored_one(size: int, asynchronous: bool) -> None:
    """Issue 28: a model holding an API key that replies "Your key is K" streamed K raw (also
    split over 4-character chunks), while the message stored under the same id showed ***."""
    model = KeyedModel(replies=[f"Your key is {KEY}, keep {KEY[:5]} safe"], api_key=KEY, size=size)
    graph = build_graph(model, SUPPORT_TOOLS, checkpointer=InMemorySaver())
    asked = {"messages": [HumanMessage("What is my key?")]}

    async def astreamed() -> list[BaseMessage]:
        return [m async for m, _ in graph.astream(asked, CONFIG, stream_mode="messages")]

    if asynchronous:
        streamed = asyncio.run(astreamed())
    else:
        streamed = [m for m, _ in graph.stream(asked, CONFIG, stream_mode="messages")]
    stored = graph.get_state(CONFIG).values["messages"][-1]
    chunks = _ai(streamed)
    assert stored.text == f"Your key is ***, keep {KEY[:5]} safe"
    assert "".join(c.text for c in chunks) == stored.text
    assert {c.id for c in chunks} == {stored.id}
    assert all(KEY[5:9] not in c.text for c in chunks)


def test_release_holds_back_what_may_begin_a_key_and_never_cuts_inside_one() -> None:
    keys = ("abcdefgh", "wxyz")
    assert release("hello abc", keys) == ("hello ", "abc")  # the end that begins a key waits
    assert release("hello", keys) == ("hello", "")  # nothing begins a key: it streams as it came
    assert release("hello w", keys) == ("hello ", "w")
    assert release("abcdefgh and more", keys) == ("*** and more", "")
    assert release("say wxyzabcdefgh", keys) == ("say ******", "")
    assert release("say wxyzabcdefg", keys) == ("say ***", "abcdefg")
    assert release("", keys) == ("", "")


@pytest.mark.parametrize(
    ("policy", "script", "nodes"),
    [
        (Policy(), [call("get_user_billing", user_id=42), "USD 49"],
         ["decide AIMessage", "execute ToolMessage", "decide AIMessageChunk"]),
        (Policy(allow={"get_user_billing"}, on_tool_error="observe"),
         [call("issue_refund", user_id=42, amount=5), "No."],
         ["decide AIMessage", "execute ToolMessage", "decide AIMessageChunk"]),
        (Policy(budget=Budget(max_steps=1)), [call("get_user_billing", user_id=42)],
         ["decide AIMessage", "execute ToolMessage", "stop AIMessage"]),
    ],
    ids=["ran", "refused", "stopped"],
)  # fmt: skip
def test_each_message_streams_under_the_node_the_chat_guide_names(
    policy: Policy, script: list[Any], nodes: list[str]
) -> None:
    """docs/guides/chat.md: ``decide`` for text and a step's calls, ``execute`` for results (a
    refused call's too), ``stop`` for a stopped run's last message. Before, the guide named
    ``validate`` for calls and ``observe`` / ``gate`` for results."""
    graph = build_graph(ScriptedChatModel(replies=script), SUPPORT_TOOLS, policy=policy)
    given = {"messages": [HumanMessage("What does user 42 pay?")]}
    seen = [
        f"{meta['langgraph_node']} {type(message).__name__}"
        for message, meta in graph.stream(given, stream_mode="messages")
    ]
    assert list(dict.fromkeys(seen)) == nodes
