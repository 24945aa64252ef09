"""What a chat client sees stream in ``stream_mode="messages"``: each run's answer once, under
the id ``messages`` stores it with, and nothing of the protocol.

LangGraph streams the chunks of every chat-model call made inside a node, whatever the node
returns: left alone, a tool call streams as tool-call chunks that no message holds, a JSON or
ReAct reply streams as raw protocol text, and the answer streams twice (from ``decide``, then
from ``finish`` under another id). So decide's model call is taken away from LangGraph's
handler: with native tool calling (and no ``answer_schema``) a reply's text is the answer as
written, and its text, only that, is passed on as it arrives; ``finish`` stores the answer
under the reply's id, so LangGraph does not send it again. A reply that calls tools: its calls
follow its text under the same id, in one last chunk sent by ``validate`` once they pass the
contract (``stream_calls``), so no call streams that no stored message holds. With the
``json`` and ``text`` protocols nothing streams from the model, and the answer (or why the
run stopped) arrives whole from ``finish`` (``stop``) under its stored id.

What streams is masked as the stored answer is: the model's own keys become ``***``. A key can
arrive split over chunks, so a chunk's text that ends with the beginning of a key keeps that
end back until the next chunk or the reply's end shows whether a key follows; any other chunk
streams as it came.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk, GenerationChunk
from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from gated_react._engine.langgraph_internals import (
    StreamingCallbackHandler,
    StreamMessagesHandler,
    emit,
    has_streamed,
    messages_stream,
    node_place,
)
from gated_react.redact import mask_secrets


class AnswerText(BaseCallbackHandler, StreamingCallbackHandler):  # type: ignore[type-arg]
    """Passes a model call's text to LangGraph's messages stream, and no tool-call chunk
    (``validate`` sends the calls that pass the contract). The call is tagged ``nostream``,
    so LangGraph's handler ignores it itself; the whole reply is left to ``finish``, which
    stores it under the same id (sent once: the stream skips an id it has sent)."""

    run_inline = True
    """LangGraph's handler runs inline too: chunks keep their order."""

    def __init__(self, target: StreamMessagesHandler, secrets: tuple[str, ...] = ()) -> None:
        self.target = target
        self.meta: dict[UUID, Any] = {}
        self.secrets = tuple(secret for secret in secrets if len(secret) >= 4)
        self.held: dict[UUID, tuple[AIMessageChunk, str]] = {}
        """Per model call: the last chunk passed on (its id and kind) and the raw text held
        back because it may begin a key."""

    def tap_output_iter(self, run_id: UUID, output: Any) -> Any:
        return output

    def tap_output_aiter(self, run_id: UUID, output: Any) -> Any:
        return output

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # LangGraph's handler works out where the call streams (namespace, metadata) as for
        # any call it streams; the chunks are then sent here, filtered.
        shown = [tag for tag in tags or () if tag != TAG_NOSTREAM]
        self.target.on_chat_model_start(
            serialized, messages, run_id=run_id, tags=shown, metadata=metadata, **kwargs
        )
        meta = self.target.metadata.pop(run_id, None)
        if meta is not None:
            self.meta[run_id] = meta

    def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        message = chunk.message if isinstance(chunk, ChatGenerationChunk) else None
        meta = self.meta.get(run_id)
        if meta is None or not isinstance(message, AIMessageChunk):
            return
        if not message.text:
            return
        if message.tool_call_chunks:  # its text streams; the calls follow once validated
            message = _text_of(message)
        if not self.secrets:
            emit(self.target, meta, message)
            return
        _, before = self.held.get(run_id, (message, ""))
        shown, kept = release(before + message.text, self.secrets)
        self.held[run_id] = (message, kept)
        if shown:
            emit(self.target, meta, message.model_copy(update={"content": shown}))

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        meta, (last, kept) = self.meta.pop(run_id, None), self.held.pop(run_id, (None, ""))
        if meta is not None and last is not None and kept:
            shown = mask_secrets(kept, self.secrets)
            emit(self.target, meta, last.model_copy(update={"content": shown}))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.meta.pop(run_id, None)
        self.held.pop(run_id, None)  # the run stops; its stored message says why, not this


def _text_of(chunk: AIMessageChunk) -> AIMessageChunk:
    """A chunk's text alone: a server may send a reply's last words with its first call."""
    none: list[Any] = []
    return chunk.model_copy(
        update={
            "content": chunk.text,
            "tool_call_chunks": none,
            "tool_calls": none,
            "invalid_tool_calls": none,
        }
    )


def release(text: str, secrets: tuple[str, ...]) -> tuple[str, str]:
    """What of ``text`` may stream now, masked, and the raw tail held back: the longest end of
    it that begins a secret (so a secret still arriving cannot begin in what streams), and
    never from inside a secret that arrived whole (the cut moves back to its start). A chunk
    that ends with no beginning of a secret streams whole, as it came."""
    cut = len(text) - _begun(text, secrets)
    moved = True
    while moved:
        moved = False
        for secret in secrets:
            at = text.find(secret, max(cut - len(secret) + 1, 0))
            if 0 <= at < cut:
                cut, moved = at, True
    return mask_secrets(text[:cut], secrets), text[cut:]


def _begun(text: str, secrets: tuple[str, ...]) -> int:
    """How long the end of ``text`` is that is the beginning of a secret (0: none is)."""
    longest = 0
    for secret in secrets:
        for size in range(min(len(secret) - 1, len(text)), longest, -1):
            if text.endswith(secret[:size]):
                longest = size
                break
    return longest


def model_config(
    config: RunnableConfig, answer_streams: bool, secrets: tuple[str, ...] = ()
) -> RunnableConfig:
    """The config decide calls the model with: tagged so LangGraph never streams the call
    itself; with ``AnswerText`` (masking ``secrets``) among its callbacks when
    ``answer_streams`` and the run streams messages."""
    tagged: RunnableConfig = {**config, "tags": [*config.get("tags", ()), TAG_NOSTREAM]}
    target = messages_stream(config) if answer_streams else None
    callbacks = config.get("callbacks")
    if target is None or not isinstance(callbacks, BaseCallbackManager):
        return tagged
    manager = callbacks.copy()
    manager.add_handler(AnswerText(target, secrets), inherit=True)
    return {**tagged, "callbacks": manager}


def stream_calls(config: RunnableConfig | None, message: AIMessage) -> None:
    """Send a step's calls on the messages stream when its text streamed first, under the
    same id. LangGraph sends nothing more under an id it has sent, so the stored message with
    its calls never followed, and a client saw results of calls it had not seen. They go as
    one last chunk, with the reply's usage: a client that joins the chunks of an id (useStream
    does) then holds the stored message, text once."""
    target = messages_stream(config) if config is not None else None
    if target is None or not message.tool_calls or not has_streamed(target, message.id):
        return
    place = node_place(target, config) if config is not None else None
    if place is not None:
        emit(target, place, calls_chunk(message))


def calls_chunk(message: AIMessage) -> AIMessageChunk:
    """The calls of ``message`` as the chunk a client streams them in, under its id."""
    chunks = [
        {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
        for i, c in enumerate(message.tool_calls)
    ]
    return AIMessageChunk(
        content="",
        id=message.id,
        tool_call_chunks=chunks,
        usage_metadata=message.usage_metadata,
        response_metadata=message.response_metadata,
    )
