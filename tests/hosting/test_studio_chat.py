"""Chat through ``langgraph dev``, exactly as a chat client (LangGraph Studio's chat view, Agent
Chat UI) drives it with ``langgraph-sdk``: ``{"messages": [...]}`` in, ``values["messages"]`` out
(LangChain messages as the server serializes them: dicts with ``type`` and ``content``), the AI
turn last; a follow-up on the same thread is a new run that sees the earlier turns; a stopped run
says why in the chat. One server for the module, one thread per case."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from langchain_core.messages import convert_to_messages
from langgraph_sdk.client import LangGraphClient

from gated_react._engine.conversation.transcript import calls_shown
from gated_react.stops import said

from ..support.openai_server import FakeOpenAI, Reply, reply, tool_call
from ..support.studio_server import DevServer, drive
from .stored import stored, viewed

pytestmark = pytest.mark.studio

FIRST = "Which plan is user 42 on?"
SECOND = "What did I ask you first?"
ANNA = {"currency": "USD", "plan": "pro_monthly", "price_usd": 49.0, "days_since_first_payment": 10}
ANSWER = f"observed: {json.dumps({'billing': ANNA})}"
TWO_STEPS = {"max_steps": 2}  # one tool call and the answer: a second run needs fresh budgets


SAYS = "Say what you do, then look up user 42."
SAID = "Let me look that up."


def _model(request: dict[str, Any]) -> Reply:
    """Answers from the prompt alone, so no case depends on the order the server serves in.
    A first turn reads user 42's billing and answers with what it saw (asked ``SAYS``, it writes
    ``SAID`` with the call); a follow-up (the prompt shows earlier turns) reads the profile,
    then answers with the first thing the user asked."""
    messages = convert_to_messages(request["messages"])
    follow_up = any(m.type == "ai" and not m.tool_calls for m in messages)  # an earlier answer
    if not calls_shown(messages) and messages[-1].text == SAYS:
        return Reply(content=SAID, tool_calls=[("get_user_billing", {"user_id": 42})])
    if not calls_shown(messages):
        name = "get_user_profile" if follow_up else "get_user_billing"
        return tool_call(name, user_id=42)
    if follow_up:
        return reply(f"You first asked: {next(m.text for m in messages if m.type == 'human')}")
    seen = [m.content for m in messages if m.type == "tool"]
    return reply(f"observed: {seen[-1]}")


STUDIO_DEFAULT = _model  # what the model answers on tests/conftest.py's dev


def _human(text: str) -> dict[str, Any]:
    """A message as LangGraph Studio's chat view sends it."""
    return {"type": "human", "content": text}


def _human_blocks(text: str) -> dict[str, Any]:
    """A message as Agent Chat UI sends it: its own id, content as a list of blocks."""
    return {"id": str(uuid.uuid4()), "type": "human", "content": [{"type": "text", "text": text}]}


def _chat(*messages: dict[str, Any]) -> Any:
    """A run's input as the chat clients send it."""
    return {"messages": list(messages)}


def _turns(values: dict[str, Any], *, steps: bool = False) -> list[tuple[str, str]]:
    """The chat as a client renders it: (type, text) per message, text blocks joined; without
    ``steps``, only the questions and answers (no tool call or result)."""
    out = []
    for message in values["messages"]:
        if not steps and (message["type"] == "tool" or message.get("tool_calls")):
            continue
        content = message["content"]
        if isinstance(content, list):
            content = "".join(block["text"] for block in content if block.get("type") == "text")
        out.append((message["type"], content))
    return out


async def _thread(client: LangGraphClient, context: dict[str, Any]) -> tuple[str, str]:
    assistant = await client.assistants.create(graph_id="refund", context=context)
    return assistant["assistant_id"], (await client.threads.create())["thread_id"]


async def _streamed(
    client: LangGraphClient, tid: str, aid: str, message: dict[str, Any]
) -> list[Any]:
    """Every values snapshot of a run, streamed as the chat clients stream it."""
    stream = client.runs.stream(tid, aid, input=_chat(message), stream_mode="values")
    return [part.data async for part in stream if part.event == "values"]


def test_the_input_schema_offers_messages(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> dict[str, Any]:
        assistant = await client.assistants.create(graph_id="refund")
        return dict(await client.assistants.get_schemas(assistant["assistant_id"]))

    schemas = drive(dev, scenario)
    shown = schemas["input_schema"]["properties"]
    assert set(shown) == {"goal", "messages"}
    variants = shown["messages"].get("anyOf", [shown["messages"]])
    assert "array" in [v.get("type") for v in variants], shown["messages"]  # a list, optional
    assert "messages" in schemas["output_schema"]["properties"]


def test_a_message_is_answered_by_the_last_message(
    dev: DevServer, studio_model: FakeOpenAI
) -> None:
    async def scenario(client: LangGraphClient) -> Any:
        aid, tid = await _thread(client, TWO_STEPS)
        out = await client.runs.wait(tid, aid, input=_chat(_human(FIRST)))
        return out, (await client.threads.get_state(tid))["values"]

    out, state = drive(dev, scenario)
    assert isinstance(out, dict)
    assert (out["status"], out["stop_reason"], viewed(out)["answer"]) == ("ok", "success", ANSWER)
    assert _turns(out) == [("human", FIRST), ("ai", ANSWER)]
    assert out["messages"] == state["messages"]
    assert all(message["id"] for message in out["messages"])  # clients key their list on it
    goals = [r["messages"][0]["content"] for r in studio_model.requests]
    assert FIRST in goals  # the message was the goal, with no earlier conversation


def test_a_follow_up_is_a_new_run_that_sees_the_conversation(
    dev: DevServer, studio_model: FakeOpenAI
) -> None:
    follow_up = _human_blocks(SECOND)

    async def scenario(client: LangGraphClient) -> tuple[Any, list[Any], Any, str]:
        aid, tid = await _thread(client, TWO_STEPS)
        first = await client.runs.wait(tid, aid, input=_chat(_human(FIRST)))
        snapshots = await _streamed(client, tid, aid, follow_up)
        return first, snapshots, (await client.threads.get_state(tid))["values"], str(tid)

    first, snapshots, state, thread = drive(dev, scenario)
    assert first["stop_reason"] == "success"
    final = snapshots[-1]
    assert (final["status"], final["stop_reason"]) == ("ok", "success")
    assert [step["action"]["name"] for step in viewed(final)["history"]] == [
        "get_user_billing",
        "get_user_profile",
    ]
    recalled = f"You first asked: {FIRST}"
    chat = [("human", FIRST), ("ai", ANSWER), ("human", SECOND), ("ai", recalled)]
    assert _turns(final) == _turns(state) == chat
    assert state["messages"][4]["id"] == follow_up["id"]  # the client's optimistic message
    for shown in snapshots:  # the chat only grows: nothing shown is later replaced
        assert shown["messages"] == final["messages"][: len(shown["messages"])]
    follow_ups = [  # the requests that show an earlier answer
        r["messages"]
        for r in studio_model.requests
        if any(m["role"] == "assistant" and not m.get("tool_calls") for m in r["messages"])
    ]
    asked = follow_ups[0]  # the first turn as it happened: its call, its result, its answer
    assert [m["role"] for m in asked] == ["user", "assistant", "tool", "assistant", "user"]
    assert asked[1]["tool_calls"][0]["id"] == asked[2]["tool_call_id"]
    assert asked[1]["tool_calls"][0]["id"] == state["messages"][1]["tool_calls"][0]["id"]
    # fresh budgets: two more steps within max_steps 2, as the follow-up's record counts them
    assert stored(dev, thread)["usage"]["steps"] == 2


@pytest.mark.parametrize(
    ("context", "reason"),
    [
        ({"allow": ["get_user_profile"]}, "tool_denied:get_user_billing"),
        ({"max_steps": 1}, "max_steps"),
    ],
)
def test_a_stopped_run_ends_with_a_message_saying_why(
    dev: DevServer, context: dict[str, Any], reason: str
) -> None:
    async def scenario(client: LangGraphClient) -> list[Any]:
        aid, tid = await _thread(client, context)
        return await _streamed(client, tid, aid, _human(FIRST))

    snapshots = drive(dev, scenario)
    final = snapshots[-1]
    ended = (final["status"], final["stop_reason"], viewed(final)["answer"])
    assert ended == ("stopped", reason, None)
    (human, ai) = _turns(final)
    assert human == ("human", FIRST)
    assert ai == ("ai", said(reason, final["message"]))  # the agent, saying why
    assert final["message"]


def test_messages_mode_streams_the_answer_once_under_its_stored_id(dev: DevServer) -> None:
    """What Agent Chat UI streams (``messages-tuple``): the answer word by word, no tool-call
    chunk, one id, the one the thread keeps. It streamed twice under two ids before."""

    async def scenario(client: LangGraphClient) -> tuple[list[Any], Any]:
        aid, tid = await _thread(client, TWO_STEPS)
        stream = client.runs.stream(
            tid, aid, input=_chat(_human(FIRST)), stream_mode="messages-tuple"
        )
        parts = [part.data[0] async for part in stream if part.event == "messages"]
        return parts, (await client.threads.get_state(tid))["values"]

    parts, state = drive(dev, scenario)
    answer = state["messages"][-1]
    assert answer["content"] == ANSWER
    streamed = [
        p for p in parts if p["type"] in ("ai", "AIMessageChunk") and not p.get("tool_calls")
    ]
    assert len(streamed) > 1
    assert {p["id"] for p in streamed} == {answer["id"]}
    assert "".join(p["content"] for p in streamed) == ANSWER
    assert not any(p.get("tool_call_chunks") for p in parts)


def test_messages_mode_streams_the_calls_of_a_reply_with_text_under_its_id(
    dev: DevServer,
) -> None:
    """A reply with text and a call: its text word by word, then its call, under the id the
    thread keeps, before the call's result. Before, the call never streamed, and a client
    reading the messages stream got a result for a call it had not seen."""

    async def scenario(client: LangGraphClient) -> tuple[list[Any], Any]:
        aid, tid = await _thread(client, TWO_STEPS)
        chat = _chat(_human(SAYS))
        stream = client.runs.stream(tid, aid, input=chat, stream_mode="messages-tuple")
        parts = [part.data[0] async for part in stream if part.event == "messages"]
        return parts, (await client.threads.get_state(tid))["values"]

    parts, state = drive(dev, scenario)
    proposed, result = state["messages"][1:3]
    mine = [p for p in parts if p["id"] == proposed["id"]]
    assert "".join(p["content"] for p in mine) == proposed["content"] == SAID
    assert [c["id"] for c in mine[-1]["tool_calls"]] == [proposed["tool_calls"][0]["id"]]
    assert parts.index(mine[-1]) < [p["id"] for p in parts].index(result["id"])


def test_stored_ai_messages_keep_the_replys_usage_and_metadata(dev: DevServer) -> None:
    """What a chat UI showing a message's tokens or model reads. Before, the thread's AI
    messages had no ``usage_metadata`` and an empty ``response_metadata``. (The server's own
    checkpointer, which replays the conversation's writes as dicts, is
    ``tests/test_state.py``'s: this project's ``langgraph.json`` names the package's.)"""

    async def scenario(client: LangGraphClient) -> Any:
        aid, tid = await _thread(client, TWO_STEPS)
        chat = _chat(_human(FIRST))
        async for _ in client.runs.stream(tid, aid, input=chat, stream_mode="messages-tuple"):
            pass
        return (await client.threads.get_state(tid))["values"]

    said = [m for m in drive(dev, scenario)["messages"] if m["type"] == "ai"]
    assert [m["response_metadata"]["finish_reason"] for m in said] == ["tool_calls", "stop"]
    for message in said:
        assert message["usage_metadata"]["total_tokens"] > 0
        assert "usage_metadata" not in message["additional_kwargs"]


def test_a_message_typed_while_a_question_waits_starts_a_new_run(dev: DevServer) -> None:
    """Agent Chat UI sends the new message as input on the paused thread: the waiting call is
    traced as refused, the chat says so, and the new message is answered with fresh budgets."""

    async def scenario(client: LangGraphClient) -> tuple[Any, Any, str]:
        aid, tid = await _thread(client, {"require_approval": ["get_user_billing"], **TWO_STEPS})
        await client.runs.wait(tid, aid, input=_chat(_human(FIRST)))
        waiting = await client.threads.get_state(tid)
        await client.runs.wait(tid, aid, input=_chat(_human_blocks(SECOND)))
        return waiting, await client.threads.get_state(tid), str(tid)

    waiting, after, thread = drive(dev, scenario)
    assert waiting["next"] == ["gate"]
    values = after["values"]
    assert (values["stop_reason"], after["next"], after["interrupts"]) == ("success", [], [])
    turns = _turns(values)
    assert [who for who, _ in _turns(values, steps=True)] == [
        "human",
        "ai",  # the call that waited,
        "tool",  # answered: not run
        "ai",
        "human",
        "ai",
        "tool",
        "ai",
    ]
    cut = "I did not finish: a new message came before get_user_billing could be settled."
    assert turns[1][1] == cut
    assert turns[2:] == [("human", SECOND), ("ai", f"You first asked: {FIRST}")]
    # fresh budgets: with the first run's step, max_steps 2 would have stopped it
    assert stored(dev, thread)["usage"]["steps"] == 2
