"""What a run's record and conversation say when read back: the trace (every call that reached
the gate, in order, how it went, and the call that ended the run), the history of calls and
results, the usage, the answer. Derived each time they are read, never stored."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence, Set
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from gated_react._engine.authority.budgets import entry
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.conversation.chat import as_ran, ran
from gated_react._engine.conversation.turns import of_run, question_at
from gated_react._engine.execution.call_keys import args_hash
from gated_react._engine.execution.tool_results import is_blocks, record
from gated_react._engine.storable import plain
from gated_react.state import Extension, HistoryEntry, ToolAction, TraceEntry
from gated_react.stops import has_ended


def trace(
    records: Sequence[Record], unkeyed: bool = False, superseded: Set[str] = frozenset()
) -> list[TraceEntry]:
    """The audit log of a run, from its record: a call is ``ok`` once it ran and returned (a
    call let through that never finished is not), or a human answered in its place; a call let
    through whose step was asked of the model again before it started (``superseded``: it never
    ran) is left out. A budget
    extension is shown when its record verifies or, in a store without a key (``unkeyed``: no
    other process's record can verify there), as recorded; only a verified one raises a limit
    (``spend.Tally``)."""
    entries: dict[str, TraceEntry] = {}
    order: list[str] = []
    for rec in records:
        body, call = rec.body, str(rec.body.get("call") or rec.key)
        if call in superseded and rec.kind is Kind.PERMIT:
            continue
        if rec.kind in (Kind.PERMIT, Kind.REFUSED) and call not in entries:
            refused = rec.kind is Kind.REFUSED
            human = bool(body.get("by_human"))
            entries[call] = TraceEntry(
                step=_step(body), tool=str(body.get("tool")),
                args_hash=str(body.get("args_hash") or _hash_of(body.get("args"))),
                ok=human, error=body.get("error") if refused and not human else None,
                by_human=True if human else None,
            )  # fmt: skip
            order.append(call)
        elif rec.kind is Kind.DONE and call in entries:
            ok = bool(body.get("ok"))
            entries[call] = entries[call].model_copy(update={"ok": ok, "error": _error(body, ok)})
        elif rec.kind is Kind.EXTENDED and (rec.verified or unkeyed):
            key = f"extended:{rec.seq}"
            entries[key] = entry(Extension.model_validate(body))
            order.append(key)
        elif rec.kind is Kind.ENDED:
            _ended(rec, entries, order)
    return [entries[key] for key in order]


def _ended(rec: Record, entries: dict[str, TraceEntry], order: list[str]) -> None:
    """The end of the run marks the call that caused it (added, when the gate stopped the
    run before letting it through)."""
    body = rec.body
    call = body.get("call")
    if not call or body.get("reason") == "success":
        return
    found = entries.get(str(call))
    if found is None:
        found = TraceEntry(step=_step(body), tool=str(body.get("tool")),
                           args_hash=str(body.get("args_hash") or ""), ok=False)  # fmt: skip
        order.append(str(call))
    entries[str(call)] = found.model_copy(update={"stop_reason": body.get("reason"), "ok": False,
                                                  "error": None})  # fmt: skip


def _step(body: Mapping[str, Any]) -> int:
    """The step a record belongs to: the model decisions made by then (the step's own
    included: the gate checks a step's calls after its decision)."""
    found = body.get("step")
    return found if isinstance(found, int) and found >= 0 else 0


def _hash_of(args: Any) -> str:
    try:
        return args_hash(json.loads(args)) if isinstance(args, str) else args_hash(args)
    except ValueError:
        return args_hash(None)


def _error(body: Mapping[str, Any], ok: bool) -> str | None:
    return None if ok else (str(body["error"]) if body.get("error") else None)


def history(messages: Sequence[BaseMessage]) -> list[HistoryEntry]:
    """Every call in the conversation that has a result, with it, oldest first."""
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage) and ran(m)}
    out, step = [], 0
    for message in messages:
        if not isinstance(message, AIMessage) or not message.tool_calls:
            if message.type == "human":
                step = 0
            continue
        step += 1
        for call in message.tool_calls:
            found = results.get(str(call.get("id")))
            if found is None:
                continue
            args, text = as_ran(call, found)  # what ran, where a human edited the call
            shown: Any = found.content
            observation = record(shown) if is_blocks(shown) else _data(text)
            action = ToolAction(name=call["name"], args=args, id=call.get("id"))
            out.append(HistoryEntry(step=step, action=action, observation=observation,
                                    ok=found.status != "error"))  # fmt: skip
    return out


def _data(text: str) -> Any:
    """A result as the tool returned it: JSON data as data (a result is stored as the text the
    model read: an object, an array, a number, a string, true, false or null), anything else
    as that text. So is JSON no store could hold (nested deeper than ``MAX_NESTING``, an
    integer past 64 bits, NaN): a run read back must serialize."""
    try:
        return plain(json.loads(text, parse_constant=_not_json))
    except (ValueError, RecursionError):  # Unstorable is a ValueError
        return text


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def question(messages: Sequence[BaseMessage]) -> str | None:
    """The id of the conversation's last human message: the question its run answers."""
    at = question_at(messages)
    return None if at is None else str(messages[at].id)


def newest_run(records: Sequence[Record], thread: str, asked: str) -> str | None:
    """Of ``records``, the newest unsaved run on question ``asked`` in ``thread``, by the
    records that opened them (keyed by their question)."""
    opened = [
        r for r in records
        if r.kind is Kind.OPENED and r.thread == thread and of_run(r.run, asked, saved=False)
    ]  # fmt: skip
    return max(opened, key=lambda r: r.seq).run if opened else None


def answer(values: Mapping[str, Any]) -> str | None:
    """The run's answer: the last AI message's text, once the run ended with one."""
    if not has_ended(values.get("status"), values.get("stop_reason")) or values["status"] != "ok":
        return None
    messages = values.get("messages") or []
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage):
        return last.text
    return last.text if isinstance(last, ToolMessage) else None  # a return_direct result
