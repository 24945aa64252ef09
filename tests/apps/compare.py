"""How a gated-react run differs from the create_agent run of the same program, for a user.

Each difference is one line naming where it is (the exit, a printed line, the n-th call's
result key, a stored message, a model request) and both sides. Compared: how the program
ended, everything it printed, what each invoke / stream gave it (result keys, messages,
``structured_response``, the answer), the thread's stored messages, that every tool call is
answered exactly once, which tools ran, and what the model was sent.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from typing import Any

from .harness import PROMPT_EXTRA_CHARS_ALLOWED, Run

MAX_SHOWN = 240
ABSENT = "<absent>"
"""A key one side's message has and the other's lacks (``refusal: None`` is not absent)."""


def _short(value: Any) -> str:
    shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return shown if len(shown) <= MAX_SHOWN else shown[: MAX_SHOWN - 3] + "..."


def ending(ref: Run, ours: Run) -> list[str]:
    if (ref.code, ref.error) == (ours.code, ours.error) or (ref.code == ours.code == 0):
        return []
    return [f"exit: {ref.code} vs {ours.code}; gated_react ended with: {_short(ours.error)}"]


def printed(ref: Run, ours: Run) -> list[str]:
    """stdout: the line counts, then the first differing lines as a unified diff."""
    theirs, mine = ref.stdout.splitlines(), ours.stdout.splitlines()
    if theirs == mine:
        return []
    diff = [
        line
        for line in difflib.unified_diff(theirs, mine, "create_agent", "gated_react", n=0)
        if not line.startswith(("---", "+++", "@@"))
    ]
    shown = " | ".join(_short(line) for line in diff[:6])
    return [f"stdout: {len(theirs)} lines vs {len(mine)}; first changes: {shown}"]


def final_messages(record: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The messages a call left: the thread's stored ones, else the result's or the last
    values chunk's."""
    for source in (record.get("stored"), record.get("result")):
        if isinstance(source, dict) and "messages" in source:
            return source["messages"]
    values = [c for c in record.get("chunks", []) if isinstance(c, dict) and "messages" in c]
    return values[-1]["messages"] if record.get("mode") == "values" and values else None


def unanswered(messages: list[dict[str, Any]]) -> list[str]:
    """Tool call ids not answered exactly once (a call still waiting at the end excepted)."""
    answers = Counter(m["tool_call_id"] for m in messages if m["type"] == "tool")
    calls = [c["id"] for m in messages if m["type"] == "ai" for c in m.get("tool_calls", [])]
    last = messages[-1] if messages else {}
    waiting = {call["id"] for call in last.get("tool_calls", [])}
    problems = [f"{i} answered {answers[i]} times" for i in calls if answers[i] > 1]
    problems += [f"{i} not answered" for i in calls if answers[i] == 0 and i not in waiting]
    problems += [f"{i} answers no call" for i in answers if i not in calls]
    return problems


def ran(messages: list[dict[str, Any]]) -> list[str]:
    return [m.get("name", "?") for m in messages if m["type"] == "tool" and m["status"] != "error"]


def _kind(message: dict[str, Any]) -> Any:
    return message.get("type", message.get("role"))


def _messages(where: str, theirs: list[Any], mine: list[Any]) -> list[str]:
    if theirs == mine:
        return []
    kinds = [_kind(m) for m in theirs], [_kind(m) for m in mine]
    if kinds[0] != kinds[1]:
        return [f"{where}: message types {kinds[0]} vs {kinds[1]}"]
    for i, (a, b) in enumerate(zip(theirs, mine, strict=True)):
        for key in sorted(set(a) | set(b)):
            left, right = a.get(key, ABSENT), b.get(key, ABSENT)
            if left != right:
                return [f"{where}[{i}] {key}: {_short(left)} vs {_short(right)}"]
    return []


THE_STOP = frozenset({"status", "stop_reason", "message"})
"""The keys gated-react's result adds on purpose: how the run ended (its stop reason)."""


def _result(where: str, theirs: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    found = []
    added = sorted(set(mine) - set(theirs) - THE_STOP)
    lost = sorted(set(theirs) - set(mine))
    if added or lost:
        found.append(f"{where} keys: gated_react adds {added}, lacks {lost}")
    structured = theirs.get("structured_response"), mine.get("structured_response")
    if structured[0] != structured[1]:
        found.append(
            f"{where} structured_response: {_short(structured[0])} vs {_short(structured[1])}"
        )
    return found


def _record(n: int, theirs: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    where = f"call {n} ({theirs['call']})"
    found = []
    if isinstance(theirs.get("result"), dict) and isinstance(mine.get("result"), dict):
        found += _result(where + " result", theirs["result"], mine["result"])
    if "chunks" in theirs and len(theirs["chunks"]) != len(mine.get("chunks", [])):
        found.append(f"{where}: {len(theirs['chunks'])} chunks vs {len(mine.get('chunks', []))}")
    left, right = final_messages(theirs), final_messages(mine)
    if left is not None and right is not None:
        found += _messages(where + " messages", left, right)
        if ran(left) != ran(right):
            found.append(f"{where} tools run: {ran(left)} vs {ran(right)}")
    for problem in unanswered(right or []):
        found.append(f"{where}: gated_react's tool call {problem}")
    return found


def recorded(ref: Run, ours: Run) -> list[str]:
    found = []
    if len(ref.records) != len(ours.records):
        found.append(f"calls recorded: {len(ref.records)} vs {len(ours.records)}")
    for n, (theirs, mine) in enumerate(zip(ref.records, ours.records, strict=False), 1):
        found += _record(n, theirs, mine)
    return found


def _conversation(request: dict[str, Any]) -> list[Any]:
    """What the model was sent besides the system prompt."""
    return [m for m in request["messages"] if m["role"] != "system"]


def _system(request: dict[str, Any]) -> str:
    return "".join(str(m["content"]) for m in request["messages"] if m["role"] == "system")


def requested(ref: Run, ours: Run) -> list[str]:
    found = []
    if len(ref.requests) != len(ours.requests):
        found.append(f"model requests: {len(ref.requests)} vs {len(ours.requests)}")
    pairs = list(zip(ref.requests, ours.requests, strict=False))
    for n, (theirs, mine) in enumerate(pairs, 1):
        if _conversation(theirs) != _conversation(mine):
            found += _messages(f"model request {n}", _conversation(theirs), _conversation(mine))
            break
    extra = [len(_system(mine)) - len(_system(theirs)) for theirs, mine in pairs]
    if extra and max(extra) > PROMPT_EXTRA_CHARS_ALLOWED:
        found.append(f"system prompt: gated_react adds up to {max(extra)} characters")
    return found


def differences(ref: Run, ours: Run) -> list[str]:
    """Every way ``ours`` (gated_react) shows the program's user something ``ref``
    (create_agent) does not."""
    return ending(ref, ours) + printed(ref, ours) + recorded(ref, ours) + requested(ref, ours)
