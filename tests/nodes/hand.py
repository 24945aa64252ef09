"""Nodes called by hand as a graph with a checkpointer calls them: a config that names the
thread and its saver (each node finds the run's record beside that saver, as in a graph), the
step passed from node to node, and the record read back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Overwrite

from gated_react._engine.authority import audit
from gated_react._engine.authority.ledger import Book, ledger_for
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.deps import NodeDeps
from gated_react._engine.langgraph_internals import CONFIG_KEY_CHECKPOINTER
from gated_react.nodes.execute import execute
from gated_react.nodes.gate import gate
from gated_react.nodes.stop import stop
from gated_react.state import TraceEntry, Usage
from gated_react.state.conversation import add_messages_fast

from ..support.helpers import QUESTION_ID

THREAD = "t1"
Node = Callable[..., dict[str, Any]]


def saved(saver: Any = None, thread: str = THREAD) -> Any:
    """The config a node of a graph with a checkpointer gets (a fresh ``InMemorySaver``, and so
    an empty record, unless ``saver`` is given)."""
    return {
        "configurable": {"thread_id": thread, CONFIG_KEY_CHECKPOINTER: saver or InMemorySaver()}
    }


def book(config: Any, run: str = QUESTION_ID) -> Book:
    """The run's record, as the nodes read it."""
    conf = config["configurable"]
    return ledger_for(conf[CONFIG_KEY_CHECKPOINTER]).book(str(conf["thread_id"]), run)


def records(config: Any, run: str = QUESTION_ID) -> list[Record]:
    return list(book(config, run).records)


def kinds(config: Any, run: str = QUESTION_ID) -> list[str]:
    """What the record says happened, in order (``permit``, ``done``, ...)."""
    return [str(r.kind) for r in records(config, run)]


def usage(config: Any, run: str = QUESTION_ID) -> Usage:
    """The run's spend, as the budgets count it."""
    return book(config, run).tally.usage()


def trace(config: Any, run: str = QUESTION_ID) -> list[dict[str, Any]]:
    entries: list[TraceEntry] = audit.trace(records(config, run))
    return [e.model_dump(mode="json", exclude_none=True) for e in entries]


def applied(current: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """The state after ``update``, as the graph's channels fold it: messages added by their
    ids (one with a stored id replaces it) or replaced by an ``Overwrite``, every other
    channel replaced."""
    after = {**current, **{k: v for k, v in update.items() if k != "messages"}}
    written = update.get("messages")
    if isinstance(written, Overwrite):
        after["messages"] = list(written.value)
    elif written:
        after["messages"] = add_messages_fast(list(current.get("messages", [])), [written])
    return after


def through(node: Node, current: dict[str, Any], config: Any, parts: NodeDeps) -> dict[str, Any]:
    """The state after ``node`` ran on it."""
    return applied(current, node(current, config, deps=parts))


def ran(current: dict[str, Any], config: Any, parts: NodeDeps) -> dict[str, Any]:
    """The state after the gate and execute, as the graph runs them (a stop either decides
    is written by the stop node)."""
    after = through(gate, current, config, parts)
    if not after["step"].get("ending"):
        after = through(execute, after, config, parts)
    if after["step"].get("ending"):
        return applied(after, stop(after, config))
    return after


def ending(current: dict[str, Any]) -> dict[str, Any] | None:
    """The stop a node handed to ``stop`` (reason, message, call, step), if any."""
    found: dict[str, Any] | None = current["step"].get("ending")
    return found


def step_messages(
    tool: str, args: dict[str, Any], result: Any = "ok", call: str = "c0", ok: bool = True
) -> list[BaseMessage]:
    """One earlier step of the run as the conversation holds it: the AI message with the call
    and its result."""
    said = AIMessage("", tool_calls=[{"name": tool, "args": args, "id": call}], id=f"ai-{call}")
    status = "success" if ok else "error"
    answer = ToolMessage(str(result), tool_call_id=call, name=tool, status=status, id=f"r-{call}")
    return [said, answer]


def proposal(*calls: tuple[str, dict[str, Any]], first: int = 1) -> dict[str, Any]:
    """A step's calls as validate hands them to the gate, and the AI message decide wrote of
    them (``messages`` and ``calls`` of ``state``)."""
    named = [(f"c{first + i}", tool, args) for i, (tool, args) in enumerate(calls)]
    said = AIMessage(
        "",
        tool_calls=[{"name": tool, "args": args, "id": cid} for cid, tool, args in named],
        id=f"ai-c{first}",
    )
    return {"message": said, "calls": [{"id": c, "tool": t, "args": a} for c, t, a in named]}


def paid_steps(config: Any, count: int, seconds: float = 0.0, run: str = QUESTION_ID) -> None:
    """``count`` model calls paid in the run (what decide records), ``seconds`` in all, so the
    run is at step ``count``."""
    conf = config["configurable"]
    ledger = ledger_for(conf[CONFIG_KEY_CHECKPOINTER])
    thread = str(conf["thread_id"])
    each = {"tokens": 10, "cost": 0.0, "seconds": seconds / count if count else 0.0}
    ledger.append([Record(thread, run, Kind.PAID, f"model-{i}", each) for i in range(count)])
