"""The few LangGraph internals this package relies on, in one place (its conditional edges'
in ``routes``).

LangChain's own ``create_agent`` builds its nodes with ``RunnableCallable`` for the same reason
we do: one node with a sync and an async body, and bound keyword arguments instead of closures.
``tests/_engine/test_langgraph_internals.py`` pins the behaviour of each name, so an upgrade
that changes it fails there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from types import CodeType
from typing import Any, cast

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables import RunnableConfig
from langchain_core.tracers._streaming import _StreamingCallbackHandler
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_RESUME_MAP,
    CONFIG_KEY_RESUMING,
    CONFIG_KEY_RUNTIME,
    CONFIG_KEY_SCRATCHPAD,
    INTERRUPT,
    NS_END,
    NS_SEP,
)
from langgraph._internal._runnable import RunnableCallable
from langgraph.config import get_config
from langgraph.errors import GraphInterrupt
from langgraph.prebuilt.tool_node import ToolNode
from langgraph.pregel._messages import StreamMessagesHandler
from langgraph.runtime import Runtime
from langgraph.types import Interrupt, _interrupt_id, interrupt

from gated_react._engine.langgraph_internals.routes import fuse_routes, route
from gated_react.errors import MisroutedStep

__all__ = [
    "CONFIG_KEY_DURABILITY",
    "StreamMessagesHandler",
    "StreamingCallbackHandler",
    "ask_human",
    "beside_a_question",
    "can_pause",
    "earlier_interrupt_ids",
    "emit",
    "fuse_routes",
    "injected_keys",
    "injected_tool_call",
    "messages_stream",
    "node",
    "route",
    "run_key",
    "runtime_of",
    "saver_of",
    "tool_state",
]

StreamingCallbackHandler = _StreamingCallbackHandler
"""LangChain's marker for a handler that wants tokens: a chat model called with one among its
callbacks streams (``invoke`` goes through ``_stream``), as it does under LangGraph's own."""


def node(
    func: Callable[..., Any], afunc: Callable[..., Any] | None = None, **bound: Any
) -> RunnableCallable:
    """A graph node from module-level functions with ``bound`` passed as keyword arguments.

    Without ``afunc`` the sync body also runs inline under ``ainvoke`` (no thread hop), which is
    right for the pure nodes; nodes that wait on I/O pass an async body.
    """
    return RunnableCallable(func, afunc, trace=False, **bound)


def runtime_of(config: RunnableConfig) -> Runtime[Any]:
    """The run's LangGraph runtime (context, store, stream writer), as a node's ``runtime``
    parameter would get it; an empty one outside a graph (a node called by hand)."""
    found = config.get("configurable", {}).get(CONFIG_KEY_RUNTIME)
    return found if isinstance(found, Runtime) else Runtime()


def with_runtime(config: RunnableConfig, runtime: Runtime[Any]) -> RunnableConfig:
    """``config`` with ``runtime`` in place of its own: what ``get_runtime()`` and
    ``get_stream_writer()`` return inside a call made with it."""
    conf = {**config.get("configurable", {}), CONFIG_KEY_RUNTIME: runtime}
    return cast(RunnableConfig, {**config, "configurable": conf})


def run_key(config: RunnableConfig) -> tuple[Any, str]:
    """Which run a node's task belongs to: its thread and the graph it runs in, by the names
    of the nodes it is nested in (empty at the top; ``agent`` in a parent's node ``agent``).
    A namespace names each level ``node:task_id``, and a parent's task id is new at every
    replay or fork of the parent: read with it, the same run of this graph would be another
    one, with fresh budgets and its calls run again."""
    conf = config.get("configurable") or {}
    own = str(conf.get(CONFIG_KEY_CHECKPOINT_NS) or "")
    levels = own.split(NS_SEP)[:-1]  # the last is the task itself
    return conf.get("thread_id"), NS_SEP.join(level.partition(NS_END)[0] for level in levels)


def saver_of(config: RunnableConfig) -> Any:
    """The checkpointer a node's run is saved with (its own, a parent graph's or the
    server's), or None."""
    return config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER)


def can_pause(config: RunnableConfig) -> bool:
    """True when the run has a checkpointer (its own, a parent graph's or the server's), so
    ``interrupt()`` can pause it and a later resume can answer."""
    return config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER) is not None


def messages_stream(config: RunnableConfig) -> StreamMessagesHandler | None:
    """The handler behind ``stream_mode="messages"`` in this node's callbacks, if the run is
    streamed in that mode."""
    callbacks = config.get("callbacks")
    handlers = callbacks.handlers if isinstance(callbacks, BaseCallbackManager) else callbacks
    found = (h for h in handlers or () if isinstance(h, StreamMessagesHandler))
    return next(found, None)


def emit(handler: StreamMessagesHandler, meta: Any, message: Any) -> None:
    """Send one message chunk on the messages stream, where ``meta`` (what the handler keeps
    per model call) says."""
    handler._emit(meta, message)


def has_streamed(handler: StreamMessagesHandler, message_id: str | None) -> bool:
    """True when the messages stream has sent something under ``message_id``: it sends
    nothing more under that id from a node's update."""
    return message_id is not None and message_id in handler.seen


def node_place(handler: StreamMessagesHandler, config: RunnableConfig) -> Any:
    """Where the running node's messages stream (what the handler keeps per node run), or
    None when it streams none; the node's callbacks name its run as their parent."""
    run_id = getattr(config.get("callbacks"), "parent_run_id", None)
    return handler.metadata.get(run_id) if run_id is not None else None


def running_config() -> RunnableConfig | None:
    """The running task's config (what a node is given), or None outside a graph."""
    try:
        return get_config()
    except RuntimeError:
        return None


def resuming(config: RunnableConfig) -> bool:
    """Whether this task is of a pass's first step that goes on from a stored checkpoint (a
    human's answer, ``input=None`` after a crash, a ``Command``): LangGraph flags the tasks
    of that step, and no later one."""
    return bool(config.get("configurable", {}).get(CONFIG_KEY_RESUMING))


def earlier_interrupt_ids(count: int) -> list[str]:
    """The ids of the ``count`` interrupts this task raised just before the one it is about to
    raise: LangGraph numbers a task's interrupts by the answers it already has."""
    try:
        conf = get_config()["configurable"] if count > 0 else {}
    except RuntimeError:  # outside a graph (ask() called directly): no ids to keep
        return []
    scratchpad = conf.get(CONFIG_KEY_SCRATCHPAD)
    if scratchpad is None:
        return []
    slot, ns = len(scratchpad.resume), conf[CONFIG_KEY_CHECKPOINT_NS]
    return [_interrupt_id(ns, slot - k) for k in range(1, min(count, slot) + 1)]


# Tools written for create_agent: ToolNode, the node create_agent runs them in, knows which
# arguments each tool has injected (ToolRuntime, InjectedState, InjectedStore, InjectedToolArg)
# and fills them; its private helpers are reused here so the rules stay LangChain's own.


def injected_keys(tools: ToolNode, name: str) -> frozenset[str]:
    """The arguments of tool ``name`` that are injected, never the model's (ToolNode's record,
    built once when the ToolNode was)."""
    found = tools._injected_args.get(name)
    if found is None:
        return frozenset()
    named = {*found.state, found.store, found.runtime, *found.all_injected_keys}
    return frozenset(key for key in named if key)


def tool_state(tools: ToolNode, call: Any, config: RunnableConfig) -> Any:
    """The graph's state as ToolNode hands it to a tool (every channel, as stored)."""
    return tools._extract_state([call], config)


_READER = ToolNode([])
"""A ToolNode with no tools: it reads the state as any ToolNode does (``graph_state``)."""


def graph_state(config: RunnableConfig) -> Any:
    """The graph's state as a tool is handed it (every channel, as stored), read from within
    any node: what ``create_agent``'s model hooks are shown besides the messages."""
    return tool_state(_READER, {"type": "tool_call", "name": "", "args": {}, "id": ""}, config)


def injected_tool_call(tools: ToolNode, call: Any, runtime: Any) -> Any:
    """``call`` with its injected arguments filled and any the model forged dropped."""
    return tools._inject_tool_args(call, runtime)


# Why a question checks the answer it is about to take: a bare ``Command(resume=v)`` (every
# chat UI sends one) is one value per superstep that LangGraph hands to the first task calling
# ``interrupt()``. A caller who adds a ``goto`` or an ``update`` to that command can put another
# task, or other calls, in front of the question a human saw, and the human's "approve" would
# answer a question never shown. So an answer is taken only by the task that raised the
# question, for the same question: LangGraph keeps each task's latest raised interrupts among
# the checkpoint's pending writes (the scratchpad's null-resume closure holds that list).
_ASKED = "__gated_react_asked"
"""Per task attempt: how many interrupts this task has raised or had answered so far."""


def ask_human(question: dict[str, Any], same: Callable[[Any, Any], bool]) -> Any:
    """``interrupt(question)``, except that an answer waiting for this slot is taken only if
    this task raised a question here that ``same`` says is this one; otherwise the question
    is raised afresh and the answer is left alone (a caller's forged step never takes it)."""
    conf = get_config()["configurable"]
    scratchpad = conf.get(CONFIG_KEY_SCRATCHPAD)
    if scratchpad is None:
        return interrupt(question)
    slot = conf.get(_ASKED, 0)
    conf[_ASKED] = slot + 1
    asked_id = _interrupt_id(_ns(conf), slot)
    raised = _raised(conf, scratchpad).get(asked_id)
    if raised is not None and not same(raised, question):
        # the step was edited under the waiting question: asking the new one under the id a
        # human was shown the old one under would let their answer decide a call never shown
        node = str(get_config().get("metadata", {}).get("langgraph_node", "node"))
        raise MisroutedStep(node, "with a step edited under its waiting question")
    if raised is None and _fresh_answer(conf, scratchpad, slot):
        raise GraphInterrupt((Interrupt(value=question, id=asked_id),))  # nothing asked here
    return interrupt(question)


def beside_a_question(config: RunnableConfig) -> bool:
    """True when another task of this superstep raised a question that waits on this
    checkpoint. The graph runs one node a step; only a caller's ``Command(goto=...)`` can
    schedule a node beside one that waits (the gate, paused on a human), and an answer meant
    for that question could then be taken for a call it was never shown."""
    conf = config.get("configurable", {})
    scratchpad = conf.get(CONFIG_KEY_SCRATCHPAD)
    if scratchpad is None:
        return False
    asked = [task for task, channel, _ in _pending(scratchpad) if channel == INTERRUPT]
    return bool(asked) and any(task != _task_id(conf) for task in asked)


def _ns(conf: dict[str, Any]) -> str:
    return str(conf[CONFIG_KEY_CHECKPOINT_NS])


def _fresh_answer(conf: dict[str, Any], scratchpad: Any, slot: int) -> bool:
    """Whether the answer for ``slot`` arrives in this attempt (a bare resume, or a resume
    map naming the slot's interrupt id) rather than from this task's own earlier answers."""
    answered = len(scratchpad.resume)
    if slot == answered:
        return scratchpad.get_null_resume(False) is not None
    mapped = conf.get(CONFIG_KEY_RESUME_MAP) or {}
    return slot == answered - 1 and _interrupt_id(_ns(conf), slot) in mapped


def _raised(conf: dict[str, Any], scratchpad: Any) -> dict[str, Any]:
    """The questions this task raised on this checkpoint, by interrupt id."""
    task = _task_id(conf)
    found: dict[str, Any] = {}
    for task_id, channel, value in _pending(scratchpad):
        if task_id == task and channel == INTERRUPT:
            for raised in value if isinstance(value, list | tuple) else (value,):
                found[getattr(raised, "id", "")] = getattr(raised, "value", None)
    return found


def _task_id(conf: dict[str, Any]) -> str:
    """This task's id: the last part of its namespace (``node:task_id``)."""
    return _ns(conf).rsplit(NS_SEP, 1)[-1].rsplit(NS_END, 1)[-1]


def _pending(scratchpad: Any) -> Sequence[tuple[str, str, Any]]:
    """The checkpoint's pending writes, every task's (the scratchpad's null-resume closure
    holds them)."""
    reader = scratchpad.get_null_resume
    at = _cell_of(reader.__code__)
    if at is None or not reader.__closure__:
        return ()
    return cast(Sequence[tuple[str, str, Any]], reader.__closure__[at].cell_contents)


@cache
def _cell_of(code: CodeType) -> int | None:
    """Where the null-resume closure keeps the pending writes (asked once per code object: every
    node asks, every step)."""
    names = code.co_freevars
    return names.index("pending_writes") if "pending_writes" in names else None
