"""LangChain's own fake chat model, made to take tools (as ``create_agent`` binds them) and to
keep what it was sent; one that is down, one that fails before it answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

USAGE = {"input_tokens": 11, "output_tokens": 5, "total_tokens": 16}


def replies(*script: AIMessage | str) -> Iterator[AIMessage]:
    """The replies, each reporting ``USAGE``."""
    for reply in script:
        message = AIMessage(reply) if isinstance(reply, str) else reply
        yield message.model_copy(update={"usage_metadata": dict(USAGE)})


class FakeToolModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that takes tools (ignoring them) and keeps every request."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


class Down(FakeToolModel):
    """A model whose server is unreachable."""

    messages: Iterator[AIMessage] = iter(())

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise ConnectionError("connection refused")


class Flaky(FakeToolModel):
    """Fails its first ``failures`` calls, then answers from its script."""

    failures: int = 1
    calls: int = 0

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        if self.calls <= self.failures:
            raise TimeoutError("timed out")
        return super()._generate(messages, *args, **kwargs)
