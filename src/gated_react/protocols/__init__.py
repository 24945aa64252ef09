"""How the model states its action. Each protocol binds the model and turns a reply into a
candidate object for the action contract; everything after ``validate`` is shared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from gated_react.policy import Policy
from gated_react.protocols.jsonmode import JsonProtocol
from gated_react.protocols.native import ToolsProtocol
from gated_react.protocols.text import TextProtocol
from gated_react.state import HistoryEntry, Reply

BoundModel = Runnable[LanguageModelInput, BaseMessage]


class ActionProtocol(Protocol):
    """The three operations a protocol provides."""

    answer_is_text: bool
    """True when a final reply's text is the answer as written (native tool calling), so it
    may stream to a chat client as the model writes it; a JSON or ReAct reply is protocol
    syntax until it is parsed."""

    def bind(self, model: BaseChatModel, tools: Sequence[BaseTool], policy: Policy) -> BoundModel:
        """The model as it is called for every decision (tools bound, output format requested)."""
        ...

    def instructions(self, tools: Sequence[BaseTool]) -> str:
        """The part of the system prompt that teaches the reply format."""
        ...

    def candidate(self, reply: Reply, tools: Mapping[str, BaseTool], max_calls: int = 1) -> Any:
        """A parsed object for ``check_contract`` (a list of them for several tool calls, up to
        ``max_calls``: more is ``multiple_actions``, ``check_count``); raises ``ActionError``."""
        ...

    def replay(self, entries: Sequence[HistoryEntry]) -> list[BaseMessage]:
        """One past step (its calls, in order) as the model's own turns and their results."""
        ...


PROTOCOLS: dict[str, ActionProtocol] = {
    "json": JsonProtocol(),
    "text": TextProtocol(),
    "tools": ToolsProtocol(),
}

__all__ = ["PROTOCOLS", "ActionProtocol", "BoundModel"]
