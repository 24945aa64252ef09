"""The estimate before a model call is LangChain's own count, worked out faster."""

from __future__ import annotations

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from gated_react._engine.authority.estimate import approximate, estimated_tokens

CALL = {"name": "lookup", "args": {"record": 7, "note": "ünïcode ✓"}, "id": "c7"}


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage("look up the records"),
        HumanMessage("x" * 4001, name="alice"),
        HumanMessage(""),
        HumanMessage([{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": "u"}]),
        AIMessage("thinking", tool_calls=[CALL, {**CALL, "id": "c8"}]),
        AIMessage("the answer is 42"),
        AIMessage("", tool_calls=[CALL], name="agent"),
        AIMessage([{"type": "text", "text": "blocks"}], tool_calls=[CALL]),
        AIMessageChunk("a chunk"),
        ToolMessage("record 7: ok", tool_call_id="c7"),
        ToolMessage("", tool_call_id="call_" + "9" * 40, name="lookup"),
        SystemMessage("rules"),
        SystemMessage("rules", additional_kwargs={"__openai_role__": "developer"}),
    ],
)
def test_a_messages_estimate_is_langchains_count(message: BaseMessage) -> None:
    assert approximate(message) == count_tokens_approximately([message])


def test_a_conversations_estimate_is_the_sum_of_langchains_counts() -> None:
    messages = [
        SystemMessage("rules"),
        HumanMessage("q"),
        AIMessage("", tool_calls=[CALL]),
        ToolMessage("r", tool_call_id="c7"),
    ]
    expected = sum(count_tokens_approximately([m]) for m in messages)
    assert estimated_tokens(messages) == expected
    messages[1].content = "a longer question than before"  # changed in place: counted again
    assert estimated_tokens(messages) == sum(count_tokens_approximately([m]) for m in messages)
