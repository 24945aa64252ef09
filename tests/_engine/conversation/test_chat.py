"""Messages as ``create_agent`` stores them: what a reply says of itself (its token counts and
the provider's metadata: finish reason, model name, id) is kept on every AI message stored of
it, as plain JSON with the client's key masked. Before, the stored AI messages had neither,
and a chat UI that shows a message's tokens or model showed nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from pydantic import SecretStr

from gated_react import build_graph, open_checkpointer, read, stops
from gated_react._engine.conversation.chat import metadata_of
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

KEY = "sk-live-" + "Z9" * 10
USAGE = {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}


class KeyedModel(ScriptedChatModel):
    """The scripted model holding an API key, which is masked wherever its replies go."""

    api_key: SecretStr


class _Opaque:
    """What a provider's client may put in its metadata: no JSON, no class a store revives."""


def _said(text: str, *, calls: list[Any] | None = None, **metadata: Any) -> AIMessage:
    return AIMessage(
        text,
        tool_calls=calls or [],
        response_metadata={
            "finish_reason": "tool_calls" if calls else "stop",
            "model_name": "gpt-4.1-mini",
            "id": "chatcmpl-1",
            **metadata,
        },
    )


def test_a_replys_metadata_is_kept_as_plain_json_with_the_key_masked() -> None:
    reply = _said("hi", echo=f"key {KEY}", raw=_Opaque(), when=float("inf"))
    usage = {**USAGE, "input_token_details": {"cache_read": 4}}
    kept = metadata_of(reply.model_copy(update={"usage_metadata": usage}), (KEY,))
    assert kept["usage_metadata"] == {**USAGE, "input_token_details": {"cache_read": 4}}
    assert kept["response_metadata"] == {
        "finish_reason": "stop",
        "model_name": "gpt-4.1-mini",
        "id": "chatcmpl-1",
        "echo": "key ***",
    }


def test_usage_that_is_no_usage_metadata_is_left_out() -> None:
    broken = AIMessage("hi").model_copy(update={"usage_metadata": {"input_tokens": "many"}})
    assert metadata_of(broken) == {
        "usage_metadata": None, "response_metadata": None, "additional_kwargs": None,
    }  # fmt: skip


def test_every_ai_message_of_a_reply_keeps_its_metadata_through_a_store(tmp_path: Path) -> None:
    """Through the store's serializer, which revives only the state's types: an object left
    in the metadata would have made the thread unreadable."""
    profile = call("get_user_profile", user_id=42).tool_calls
    replies = [
        _said("Let me look.", calls=profile, raw=_Opaque()),
        _said("Anna is on the pro plan.", echo=KEY),
    ]
    model = KeyedModel(replies=replies, api_key=SecretStr(KEY))
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        graph = build_graph(model, SUPPORT_TOOLS, checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "t"}}
        graph.invoke({"messages": [HumanMessage("Which plan is user 42 on?")]}, config)
        stored = read(graph, "t")["messages"]
    proposed, answer = [m for m in stored if m.type == "ai"]
    assert proposed.tool_calls[0]["name"] == "get_user_profile"
    assert proposed.response_metadata["finish_reason"] == "tool_calls"
    assert "raw" not in proposed.response_metadata
    assert answer.response_metadata["finish_reason"] == "stop"
    assert answer.response_metadata["model_name"] == "gpt-4.1-mini"
    assert answer.response_metadata["echo"] == "***"
    for message in (proposed, answer):
        assert message.usage_metadata is not None
        assert message.usage_metadata["total_tokens"] > 0


def test_a_stop_is_no_reply_and_carries_no_metadata() -> None:
    profile = call("get_user_profile", user_id=42)
    graph = build_graph(ScriptedChatModel(replies=[profile, profile]), SUPPORT_TOOLS)
    out = graph.invoke({"goal": "Who is user 42?"})
    said = out["messages"][-1]
    assert out["stop_reason"] == "loop_detected"
    assert said.text == stops.said(out["stop_reason"], out["message"])  # the agent talking
    assert said.text.startswith("I was about to repeat a step I had already taken, so I stopped.")
    assert (said.usage_metadata, said.response_metadata) == (None, {})
