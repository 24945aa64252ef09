"""The conversation's reducer (``State.messages``): ``add_messages`` as a DeltaChannel folds it,
with the common write (new messages under new ids of their own) appended without walking the
conversation again.

Checking a write against every id of a 600-message conversation cost 0.19 ms, twice a step,
and a replay of a checkpoint's N writes N times that; the ids of the conversations this reducer
returned are kept instead (``_KNOWN``), for as long as something else still holds them.
"""

import operator
import sys
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    convert_to_messages,
    messages_from_dict,
)
from langgraph.graph.message import add_messages


def add_messages_fast(current: list[Any] | None, writes: Sequence[Any]) -> list[Any]:
    """``add_messages`` folded over a batch of writes (batching-invariant, as a DeltaChannel's
    reducer must be). New messages with ids of their own, new and distinct, are appended;
    anything else (a removal, a replacement, a message without an id, a chunk, a tuple or a
    dict) goes through ``add_messages``. The lists given are never changed in place."""
    out: list[Any] = current if current is not None else []
    for batch in writes:
        revived = _named(len(out), _revived(batch))
        out = _appended(out, revived) or list(add_messages(out, revived))
    return out if out is not current else list(out)


_IDS = uuid.UUID("0c5e3f86-6f0e-4d0b-9a43-37c1e0b0f4a1")


def _named(start: int, batch: Any) -> Any:
    """``batch`` with an id on every message that came without one (a chat input such as
    ``("user", "hi")``), made of its place and content. A DeltaChannel stores the write as it
    came and replays it through this reducer whenever a checkpoint is read: ``add_messages``
    would give such a message a new random id at every read, and a run is named by its
    question's id (``_engine/conversation/turns.py``)."""
    items = batch if isinstance(batch, list) else [batch]
    if all(isinstance(item, BaseMessage) and item.id for item in items):
        return batch
    named = []
    for offset, item in enumerate(items):
        if (isinstance(item, BaseMessage) and item.id) or (
            isinstance(item, dict) and item.get("id")
        ):
            named.append(item)
            continue
        try:
            (message,) = convert_to_messages([item])
        except (TypeError, ValueError, NotImplementedError):
            named.append(item)  # add_messages says what is wrong with it
            continue
        if message.id:
            named.append(message)
            continue
        seed = f"{start + offset}:{message.type}:{message.content!r}"
        named.append(message.model_copy(update={"id": str(uuid.uuid5(_IDS, seed))}))
    return named


def _revived(batch: Any) -> Any:
    """``batch`` with each message a store handed back as its dump (LangGraph's server replays
    a DeltaChannel's writes as dicts) revived whole. ``add_messages`` would convert such a dict
    as a chat input, moving the fields it does not name (``usage_metadata``,
    ``invalid_tool_calls``) into ``additional_kwargs``."""
    if not isinstance(batch, list) or dict not in set(map(type, batch)):
        return batch
    return [_revive(item) if _dumped(item) else item for item in batch]


_DUMPED = frozenset({"human", "ai", "system", "tool"})


def _dumped(item: Any) -> bool:
    """A message's ``model_dump()`` (it names ``additional_kwargs``), not a chat input."""
    return isinstance(item, dict) and item.get("type") in _DUMPED and "additional_kwargs" in item


def _revive(item: dict[str, Any]) -> Any:
    try:
        return messages_from_dict([{"type": item["type"], "data": item}])[0]
    except (TypeError, ValueError):  # not a message after all: add_messages says why
        return item


_KNOWN: dict[int, tuple[list[Any], set[str]]] = {}
"""Conversations the fast path returned, by ``id()``, each with the set of its ids. A set is
shared by a conversation and the one extended from it, so an older conversation's set holds
more ids than it has messages: it is rebuilt if that one is ever extended again (a fork)."""
_KNOWN_LOCK = threading.Lock()
_KNOWN_MAX = 64
"""Conversations kept at most (one per run in flight is what counts), the oldest dropped."""


def _appended(messages: list[Any], batch: Any) -> list[Any] | None:
    """``messages`` then ``batch`` when ``add_messages`` would give exactly that (plain messages
    on both sides, every id set, the new ones new and distinct), else None."""
    if not isinstance(batch, list) or not all(map(_plain, set(map(type, batch)))):
        return None
    new = list(map(_ID, batch))
    known = _ids(messages)
    if known is None or None in new or len(set(new)) != len(new) or not known.isdisjoint(new):
        return None
    out = [*messages, *batch]
    with _KNOWN_LOCK:  # runs on many threads share it (a sync worker's pool)
        known.update(new)
        _KNOWN.pop(id(messages), None)
        _forget_unheld()
        _KNOWN[id(out)] = (out, known)
    return out


def _ids(messages: list[Any]) -> set[str] | None:
    """The ids of ``messages`` (kept, or counted now); None when a message is not plain or has
    no id, or two share one."""
    kept = _KNOWN.get(id(messages))
    if kept is not None and kept[0] is messages and len(kept[1]) == len(messages):
        return kept[1]
    if not all(map(_plain, set(map(type, messages)))):
        return None
    known = set(map(_ID, messages))
    return None if None in known or len(known) != len(messages) else known


def _forget_unheld() -> None:
    """Drop the conversations nothing but this cache holds (their runs ended), then the oldest
    past ``_KNOWN_MAX``: a process that ran a thousand runs keeps none of their messages."""
    if _KNOWN:
        for key in [key for key, kept in _KNOWN.items() if _held_here_only(kept)]:
            del _KNOWN[key]
    while len(_KNOWN) >= _KNOWN_MAX:
        del _KNOWN[next(iter(_KNOWN))]


def _held_here_only(kept: tuple[list[Any], set[str]]) -> bool:
    return sys.getrefcount(kept[0]) <= _UNHELD


def _calibrated() -> int:
    """What ``sys.getrefcount`` says of a list only ``_KNOWN`` holds, on this interpreter."""
    probe: dict[int, tuple[list[Any], set[str]]] = {0: ([], set())}
    return sys.getrefcount(next(iter(probe.values()))[0])


_UNHELD = _calibrated()
_ID = operator.attrgetter("id")


def _plain(kind: type) -> bool:
    return issubclass(kind, BaseMessage) and not issubclass(kind, BaseMessageChunk | RemoveMessage)
