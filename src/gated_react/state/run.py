"""A run from the outside: what starts it, what it ran under, what it returns, and the keys
that say how it ended."""

from collections.abc import Sequence
from typing import Any, Literal, Self

from langchain_core.messages import AnyMessage, HumanMessage
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gated_react.state.base import StrictModel

Status = Literal["ok", "stopped"]


class RunContext(StrictModel):
    """What a run runs under, written by its first decision (and again by a later decision or
    tool step under another policy, model, base URL or protocol): compare two runs by it."""

    model_class: str
    """The chat model's class, e.g. ``langchain_openai.chat_models.base.ChatOpenAI``."""
    model: str
    """The model's name (what prices it)."""
    base_url: str | None = None
    """Where the model was served from, with any password or key masked; None for the default."""
    protocol: str
    """How the model stated its actions: ``tools``, ``json`` or ``text``."""
    policy: dict[str, Any]
    """The policy in force, every field as plain JSON (its budget among them)."""
    policy_hash: str
    """A short hash of ``policy``: equal for runs under the same policy."""
    priced_by: str | None = None
    """Where the cost came from: ``policy``, ``genai-prices <version>``, or None (unpriced)."""
    version: str
    """The gated-react version that ran it."""


class RunInput(StrictModel):
    """What starts a run: a goal, or chat messages whose last human message is the goal."""

    goal: str | None = Field(default=None, min_length=1)
    """The task, in the user's words."""
    messages: list[AnyMessage] | None = None
    """Chat messages (Studio's chat, Agent Chat UI, apps built for ``create_agent``): the last
    human message is the goal; earlier ones are the conversation the model is shown once."""

    @model_validator(mode="after")
    def _has_a_goal(self) -> Self:
        if self.goal is None and last_human_text(self.messages or []) is None:
            raise ValueError(
                "a run needs a goal: {'goal': '...'} or {'messages': [...]} with a human message"
            )
        return self


def last_human_text(messages: Sequence[Any]) -> str | None:
    """The text of the last message when it is a human message with text, else None."""
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage) and last.text.strip():
        return last.text.strip()
    return None


class RunResult(BaseModel):
    """The shape ``invoke`` returns: ``create_agent``'s keys and the run's end."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    messages: list[AnyMessage] = Field(default_factory=list)
    """The conversation as a chat client shows it, as ``create_agent`` stores it: every tool
    call id is answered by exactly one ``ToolMessage``."""
    structured_response: Any = None
    """The final answer as ``response_format`` describes it; None without a schema or before
    a final answer."""
    status: Status | None = None
    """``ok`` after a final answer, ``stopped`` after any other end, None while unfinished."""
    stop_reason: str | None = None
    """Why the run ended, e.g. ``success`` or ``tool_denied:refund``."""
    message: str | None = None
    """A sentence about the end, with numbers."""


class RunReply(BaseModel):
    """The shape ``invoke`` returns without a ``response_format``: ``create_agent``'s keys (it
    has no ``structured_response`` then either) and the run's end."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    messages: list[AnyMessage] = Field(default_factory=list)
    """The conversation as a chat client shows it, as ``create_agent`` stores it."""
    status: Status | None = None
    """``ok`` after a final answer, ``stopped`` after any other end, None while unfinished."""
    stop_reason: str | None = None
    """Why the run ended, e.g. ``success`` or ``tool_denied:refund``."""
    message: str | None = None
    """A sentence about the end, with numbers."""


RESULT_KEYS = tuple(RunResult.model_fields)
"""The keys of every ``invoke`` result, in order."""
SUMMARY_KEYS = ("status", "stop_reason", "message", "answer")
"""The keys that say how a run ended (status, stop_reason, message, answer), without its logs."""
