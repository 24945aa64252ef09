"""A request's tokens estimated before it is sent (what a call counts for until it is paid):
LangChain's approximate count (``count_tokens_approximately``), worked out once per message."""

from __future__ import annotations

import math
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from gated_react._engine.conversation.held import Held


def estimated_tokens(messages: Sequence[BaseMessage]) -> int:
    """LangChain's approximate count of ``messages``' tokens (a sum over messages), each
    message counted once while kept: a run's requests resend the same message objects
    (``transcript`` builds each step once), so a step counts only what is new in it. A
    message changed in place (a hook's edit) is one whose content's size moved: counted again."""
    total = 0
    for message in messages:
        size = len(message.content)
        kept = _COUNTED.value_of(id(message), message)
        if kept is None or kept[0] != size:
            count = approximate(message)
            _COUNTED.put(id(message), message, (size, count))
        else:
            count = kept[1]
        total += count
    return total


_COUNTED: Held[int, tuple[int, int]] = Held()
"""Each message's content size and count, while it lives."""

_ROLES: dict[type, str] = {HumanMessage: "user", AIMessage: "assistant", ToolMessage: "tool"}
"""The OpenAI role of the message classes a run's requests are made of (their subclasses,
and system messages, which may name another role, are LangChain's to count)."""


def approximate(message: BaseMessage) -> int:
    """``count_tokens_approximately([message])`` with its defaults: the same number, worked
    out here for a message of text (the three to five a step adds) without LangChain's
    conversion and checks, which were most of what a step spent estimating."""
    role = _ROLES.get(type(message))
    content = message.content
    if role is None or type(content) is not str:  # a str subclass: LangChain counts it
        return count_tokens_approximately([message])
    chars = len(content) + len(role) + (len(message.name) if message.name else 0)
    if role == "assistant":
        calls = message.tool_calls  # type: ignore[attr-defined]
        chars += len(repr(calls)) if calls else 0
    elif role == "tool":
        chars += len(message.tool_call_id)  # type: ignore[attr-defined]
    return math.ceil(math.ceil(chars / 4.0) + 3.0)
