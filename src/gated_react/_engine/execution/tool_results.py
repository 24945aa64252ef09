"""A tool's result as the run keeps it, as ``create_agent`` keeps it: the content the model is
shown (text, JSON, or content blocks such as text and an image), a bounded textual record of
it for the history, and the artifact a ``ToolMessage`` carries beside its content, which the
conversation keeps and the model never sees."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools.base import TOOL_MESSAGE_BLOCK_TYPES

from gated_react._engine.execution.tool_runner import cut, storable, to_observation
from gated_react._engine.storable import Unstorable, plain
from gated_react.redact import masked_in
from gated_react.state import HistoryEntry


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a call's ``ToolMessage`` holds."""

    content: str | list[Any]
    """What the model is shown: text (data as JSON), or content blocks (text and an image)."""
    artifact: Any = None
    """What the tool returned beside its content: the conversation keeps it, the model never
    sees it."""

    @property
    def text(self) -> str:
        """The content as text (blocks as their text record)."""
        return self.content if isinstance(self.content, str) else record(self.content)


def outcome(value: Any, limit: int, secrets: tuple[str, ...] = ()) -> ToolOutput:
    """What a call that returned ``value`` shows (a ``ToolMessage`` is its content and its
    artifact): content blocks go to the model as blocks; anything else is storable JSON cut
    at ``limit``, as text."""
    artifact = None
    if isinstance(value, ToolMessage):
        value, artifact = value.content, value.artifact
    blocks = content_blocks(value, limit, secrets)
    content = blocks if blocks else as_text(to_observation(value, limit, secrets))
    kept = None if artifact is None else _artifact(artifact, secrets)
    return ToolOutput(content, kept)


def _artifact(artifact: Any, secrets: tuple[str, ...]) -> Any:
    """An artifact as the conversation keeps it: LangChain ``Document``s as themselves (every
    checkpointer stores and revives them: a retriever's ``docs`` are docs again, as under
    ``create_agent``), anything else as bounded JSON."""
    if isinstance(artifact, Document) or (
        isinstance(artifact, list | tuple)
        and artifact
        and all(isinstance(item, Document) for item in artifact)
    ):
        return artifact if not secrets else masked_in(artifact, secrets, documents=True)
    return storable(artifact, secrets)


def as_text(observation: Any) -> str:
    """An observation as the model reads it: text as is, anything else as JSON."""
    if isinstance(observation, str):
        return observation
    return json.dumps(observation, ensure_ascii=False, default=str)


def failed(value: Any) -> bool:
    """Whether a tool reported its own failure: a ``ToolMessage`` with status ``error``."""
    return isinstance(value, ToolMessage) and value.status == "error"


def is_blocks(value: Any) -> bool:
    """Whether ``value`` is content blocks, as LangChain takes them for a ``ToolMessage``'s
    content: a list of dicts, each of a type a tool message holds (text, image, file, ...)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(b, dict) and b.get("type") in TOOL_MESSAGE_BLOCK_TYPES for b in value)
    )


def content_blocks(value: Any, limit: int, secrets: tuple[str, ...] = ()) -> list[Any] | None:
    """The blocks as the model is shown them, secrets masked, their text within ``limit``
    characters in all, cut with the visible marker (an image cannot be cut: it goes whole);
    None when ``value`` is not blocks, or not blocks any store holds (then it is text)."""
    if not is_blocks(value):
        return None
    try:
        blocks: list[dict[str, Any]] = plain(value, secrets=secrets)
    except Unstorable:
        return None
    left, shown = limit, []
    for block in blocks:
        if block["type"] != "text":
            shown.append(block)
            continue
        text = str(block.get("text", ""))
        shown.append({**block, "text": cut(text, max(left, 0))})
        left -= len(text)
    return shown


def record(blocks: list[Any]) -> str:
    """Blocks as text: what the history keeps of them, and what a protocol that replies in
    text reads beside them; a block that is not text by its kind (``[image image/png]``)."""
    return "\n".join(map(_line, blocks))


def results_in_blocks(messages: Sequence[BaseMessage]) -> dict[str, list[Any]]:
    """The results the model was shown as content blocks (an image, say), by call id: the
    history keeps their text only, the conversation the blocks."""
    return {
        m.tool_call_id: m.content
        for m in messages
        if isinstance(m, ToolMessage) and isinstance(m.content, list) and is_blocks(m.content)
    }


def with_blocks(step: list[HistoryEntry], media: dict[str, list[Any]]) -> list[HistoryEntry]:
    """The step's entries with the blocks their calls returned (the very entries when none
    did, so what was built of them is reused)."""
    if not media or not any(entry.action.id in media for entry in step):
        return step
    return [
        entry.model_copy(update={"observation": media[entry.action.id]})
        if entry.action.id in media
        else entry
        for entry in step
    ]


def _line(block: dict[str, Any]) -> str:
    if block["type"] == "text":
        return str(block.get("text", ""))
    if block["type"] == "json":
        return json.dumps(block.get("json"), ensure_ascii=False, default=str)
    kind = " ".join(str(part) for part in (block["type"], block.get("mime_type")) if part)
    return f"[{kind}]"
