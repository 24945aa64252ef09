"""Runs on a thread, like turns of a chat: a run's goal (given, or the last human message), fresh
budgets when the thread's previous run has ended, and the conversation so far.

``decide`` is every run's first node, so a run starts there: on a new thread, or when a new goal
or message arrives on a thread whose last run ended. The thread's logs (``history``, ``trace``)
are kept; this run's steps and loop keys start where the earlier runs' end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from gated_react.state import RunInput, State, Usage, dump, last_human_text

CONTEXT_MESSAGES = 20
"""The most earlier messages shown to the model as the conversation so far."""
_CONTEXT_CHARS = 2000


def opening(state: State) -> tuple[State, dict[str, Any]]:
    """The state this decision works from, and the update that starts a run when this is the
    run's first decision (empty otherwise)."""
    if state.status is None and state.usage.steps:
        return state, {}
    # LangGraph maps input keys to channels without the input schema's own checks: apply them
    # here, so {} or {"goal": ""} is the same clear ValidationError as a wrong type.
    RunInput.model_validate({"goal": state.goal or None, "messages": state.messages or None})
    changes: dict[str, Any] = {}
    update: dict[str, Any] = {}
    if state.status is not None:  # the thread's last run ended: this is a new run
        changes = {
            "usage": Usage(),
            "retry": None,
            "history_from": len(state.history),
            "seen_from": len(state.seen),
        }
        update = {
            "usage": dump(Usage()),
            **dict.fromkeys(("status", "stop_reason", "message", "answer", "retry", "action")),
            "reply": None,
            "calls": [],
            "history_from": changes["history_from"],
            "seen_from": changes["seen_from"],
        }
    text = last_human_text(state.messages)
    if text is not None:
        changes["goal"] = update["goal"] = text
    else:
        asked = HumanMessage(state.goal)
        changes["messages"] = [*state.messages, asked]
        update["messages"] = [asked]
    return state.model_copy(update=changes), update


def conversation(messages: Sequence[BaseMessage]) -> str:
    """The messages before the goal's, as text: what was asked and answered earlier."""
    earlier = [
        m for m in messages[:-1] if isinstance(m, HumanMessage | AIMessage) and m.text.strip()
    ]
    lines = []
    for message in earlier[-CONTEXT_MESSAGES:]:
        who = "User" if isinstance(message, HumanMessage) else "Assistant"
        text = message.text.strip()
        clipped = text if len(text) <= _CONTEXT_CHARS else text[: _CONTEXT_CHARS - 3] + "..."
        lines.append(f"{who}: {clipped}")
    return "\n".join(lines)


def closing(text: str) -> dict[str, Any]:
    """The AI message that ends a run in the conversation: its answer, or why it stopped."""
    return {"messages": [AIMessage(text)]}
