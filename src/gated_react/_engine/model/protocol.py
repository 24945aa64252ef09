"""What the engine asks of a protocol (``ActionProtocol``) and the model a protocol binds
(``BoundModel``). The protocols themselves are in ``protocols/``; ``build_graph`` chooses one
by the policy and hands it to ``NodeDeps.build``, so the engine never imports them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from gated_react.policy import Policy
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

    def instructions(self, tools: Sequence[BaseTool], max_calls: int = 1) -> str:
        """The part of the system prompt that teaches the reply format, for replies of up to
        ``max_calls`` tool calls (``Policy.max_parallel_calls``)."""
        ...

    def candidate(self, reply: Reply, tools: Mapping[str, BaseTool], max_calls: int = 1) -> Any:
        """A parsed object for ``check_contract`` (a list of them for several tool calls, up to
        ``max_calls``: more is ``multiple_actions``, ``check_count``); raises ``ActionError``."""
        ...

    def replay(self, entries: Sequence[HistoryEntry]) -> list[BaseMessage]:
        """One past step (its calls, in order) as the model's own turns and their results."""
        ...
