"""Every message a run's input brings is given its id when the input is sent, so the id is
stored with the input.

A run is named by its question's id (``_engine/conversation/turns.py``). LangGraph keeps an
invocation's input in the input checkpoint as it was sent and maps it to channel writes each
time that checkpoint is run, giving a message that came without an id a new random one each
time (``ensure_message_ids``): a time travel to the input checkpoint of a question a chat
client sent without an id would be a new run with a record of its own, and run again the calls
the first run made (a payment made once per replay). With the id given here, the input
checkpoint holds it, every replay asks the same question (the same run, whose record says what
ran), and a new submission of the same words (a chat UI's regenerate) is a new question.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

G = TypeVar("G", bound=CompiledStateGraph[Any, Any, Any, Any])

_ROLES = ("role", "type")


def with_input_ids(value: Any) -> Any:
    """``value`` (an invocation's input, or a ``Command``) with an id on every message of its
    ``messages`` that has none; anything else, and the caller's objects, unchanged."""
    if isinstance(value, Command):
        update = _update_ids(value.update)
        if update is value.update:
            return value
        return Command(graph=value.graph, update=update, resume=value.resume, goto=value.goto)
    if isinstance(value, Mapping) and "messages" in value:
        named = _named(value["messages"])
        return value if named is value["messages"] else {**value, "messages": named}
    return value


def _update_ids(update: Any) -> Any:
    """A ``Command``'s update (a mapping, or ``(channel, value)`` pairs) with ids given."""
    if isinstance(update, Mapping):
        return with_input_ids(update)
    if not isinstance(update, list | tuple):
        return update
    pairs = [
        (pair[0], _named(pair[1])) if _is_pair(pair) and pair[0] == "messages" else pair
        for pair in update
    ]
    return update if all(new is old for new, old in zip(pairs, update, strict=True)) else pairs


def _named(messages: Any) -> Any:
    if not isinstance(messages, list | tuple) or (type(messages) is tuple and _is_pair(messages)):
        return _one(messages)
    items = [_one(item) for item in messages]
    if all(new is old for new, old in zip(items, messages, strict=True)):
        return messages
    return items


def _one(item: Any) -> Any:
    """One message with an id (a new random one if it had none); what is not a message (or
    does not convert to one) is left for the reducer to refuse."""
    if isinstance(item, BaseMessage):
        return item if item.id else item.model_copy(update={"id": _new()})
    if isinstance(item, Mapping):
        if not any(key in item for key in _ROLES) or item.get("id"):
            return item
        return {**item, "id": _new()}
    if isinstance(item, str) or _is_pair(item):
        try:
            (message,) = convert_to_messages([item])
        except (TypeError, ValueError, NotImplementedError):
            return item
        return message.model_copy(update={"id": message.id or _new()})
    return item


def _is_pair(item: Any) -> bool:
    """A ``(role, content)`` pair, as LangChain takes a message: a tuple, or the list a tuple
    becomes in JSON (``langgraph_sdk`` sends ``("user", ...)`` so)."""
    return isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[0], str)


def _new() -> str:
    return str(uuid.uuid4())


def naming_inputs(graph: G) -> G:
    """``graph`` (a compiled graph of your own, one that runs the agent as a node) that gives
    the messages of every input its ids first (``with_input_ids``), however it is invoked or
    served (``langgraph.json`` may name the result): a replay of its input checkpoint is then
    one run of the agent inside. A graph ``build_graph`` made does so already."""
    kind = type(graph)
    if issubclass(kind, NamedInputs):
        return graph
    return _naming(kind)(**graph_attrs(graph))  # type: ignore[no-any-return]


def graph_attrs(graph: CompiledStateGraph[Any, Any, Any, Any]) -> dict[str, Any]:
    """What a compiled graph is made of, to make it again as a subclass (as LangGraph's
    ``copy`` makes a graph again from its attributes)."""
    return {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}


@functools.cache
def _naming(kind: type) -> type:
    """``kind`` with its inputs named: one class per kind, however often a graph is wrapped."""
    return type(f"Naming{kind.__name__}", (NamedInputs, kind), {})


class NamedInputs(CompiledStateGraph[Any, Any, Any, Any]):
    """A compiled graph whose two methods every invocation goes through (``invoke``,
    ``ainvoke``, ``batch``, ``astream_events``, a server's runs) name the input's messages
    first. ``build_graph``'s graphs are of this class."""

    def stream(  # LangGraph's keywords pass through unchanged
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        return super().stream(with_input_ids(input), config, **kwargs)

    def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        return super().astream(with_input_ids(input), config, **kwargs)
