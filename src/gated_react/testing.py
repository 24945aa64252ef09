"""A scripted chat model: deterministic replies for tests, demos and benchmarks, no network.

model = ScriptedChatModel(replies=[
    call("get_user_profile", user_id=42),          # a native tool call
    '{"kind": "final", "answer": "Yes"}',           # plain text (JSON or ReAct protocols)
    TimeoutError("slow"),                            # raised, like a failing client
])
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, PrivateAttr

Script = AIMessage | str | BaseException | Callable[[list[BaseMessage]], Any]


def call(name: str, /, **args: Any) -> AIMessage:
    """A reply holding one native tool call."""
    return AIMessage(
        "", tool_calls=[{"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:8]}"}]
    )


class ScriptedChatModel(BaseChatModel):
    """Replies from a script, in order; each call's input is kept in ``requests``.

    Items may be an ``AIMessage``, a string, an exception (raised) or a callable that gets the
    messages and returns one of those (under ``ainvoke`` it runs on a worker thread, as a
    blocking client would: what it does to the event loop goes through
    ``loop.call_soon_threadsafe``). With ``cycle=True`` the script repeats forever. Streamed
    (``stream``, or LangGraph's ``stream_mode="messages"``), a reply comes word by word, its tool
    calls in one last chunk, as a real client's does.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    replies: Sequence[Any]
    cycle: bool = False
    _next: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _requests: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def requests(self) -> list[list[BaseMessage]]:
        """The message lists the model was called with, oldest first."""
        return self._requests

    def bind_tools(
        self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _take(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self._requests.append(list(messages))
            index = self._next
            self._next += 1
        if index >= len(self.replies) and not self.cycle:
            raise RuntimeError(
                f"ScriptedChatModel: script exhausted after {len(self.replies)} replies"
            )
        item = self.replies[index % len(self.replies)]
        if callable(item) and not isinstance(item, BaseMessage | BaseException):
            item = item(messages)
        if isinstance(item, BaseException):
            raise item
        message = item if isinstance(item, AIMessage) else AIMessage(str(item))
        tokens_in = count_tokens_approximately(messages)
        tokens_out = count_tokens_approximately([message])
        return message.model_copy(
            update={
                "usage_metadata": {
                    "input_tokens": tokens_in,
                    "output_tokens": tokens_out,
                    "total_tokens": tokens_in + tokens_out,
                }
            }
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._take(messages))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=await self._atake(messages))])

    async def _atake(self, messages: list[BaseMessage]) -> AIMessage:
        """``_take`` off the event loop when the next reply is a function: it may block (a
        sleep, a lock), and a real async client never blocks the loop it runs on."""
        with self._lock:
            upcoming = self.replies[self._next % len(self.replies)] if self.replies else None
        if callable(upcoming) and not isinstance(upcoming, BaseMessage | BaseException):
            return await asyncio.to_thread(self._take, messages)
        return self._take(messages)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from _chunks(self._take(messages))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in _chunks(await self._atake(messages)):
            yield chunk


def _chunks(message: AIMessage) -> list[ChatGenerationChunk]:
    """A reply as a client streams it: its text word by word, then its tool calls and usage."""
    words = [w for w in re.split(r"(?<=\s)", message.text) if w]
    calls = [
        {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
        for i, c in enumerate(message.tool_calls)
    ]
    pieces = [AIMessageChunk(content=word) for word in words]
    pieces.append(
        AIMessageChunk(
            content="",
            tool_call_chunks=calls,
            usage_metadata=message.usage_metadata,
            chunk_position="last",
        )
    )
    return [ChatGenerationChunk(message=piece) for piece in pieces]
