"""Node updates turned into events: what the live view shows and the run log records.

``Tracker`` follows one run through LangGraph's ``stream_mode="updates"`` chunks and keeps the
counters a single update does not carry (tokens and seconds so far, tool calls made).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gated_react.cli.runlog import FIELDS

Described = tuple[dict[str, Any] | None, str | None, str | None]  # action, decision, observation


def clip(value: Any, limit: int = 120) -> str:
    """A short one-line text of any value."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened in a run."""

    time: str
    thread: str
    step: int
    node: str
    action: dict[str, Any] | None
    decision: str | None
    stop_reason: str | None
    tokens: int
    seconds: float
    tool_calls: int
    observation: str | None = None
    message: str | None = None

    def record(self) -> dict[str, Any]:
        """The run-log line: the fixed fields first, optional ones only when set."""
        out = {name: getattr(self, name) for name in FIELDS}
        out["seconds"] = round(self.seconds, 3)
        out["tool_calls"] = self.tool_calls
        for name in ("observation", "message"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass
class Tracker:
    """Follows one thread; ``event(node, update)`` for every streamed update."""

    thread: str
    usage: dict[str, Any] = field(default_factory=dict)
    tool_calls: int = 0
    stop_reason: str | None = None

    def event(self, node: str, update: Any) -> Event:
        update = update if isinstance(update, dict) else {"interrupts": update}
        if isinstance(update.get("usage"), dict):
            self.usage = update["usage"]
        stop = update.get("stop_reason")
        self.stop_reason = stop or self.stop_reason
        action, decision, observation = _DESCRIBE.get(node, _other)(update)
        if node == "__interrupt__":  # the node that asked: gate (approval) or execute
            node = "execute" if (action or {}).get("kind") == "outcome_unknown" else "gate"
        self.tool_calls += len(update.get("history") or ())
        if node == "stop":
            stop = self.stop_reason
        elif node == "finish":
            stop = update.get("stop_reason")
        return self.make(
            node,
            action=action,
            decision=decision,
            stop_reason=stop,
            observation=observation,
            message=update.get("message"),
        )

    def make(
        self,
        node: str,
        *,
        action: dict[str, Any] | None = None,
        decision: str | None = None,
        stop_reason: str | None = None,
        observation: str | None = None,
        message: str | None = None,
    ) -> Event:
        return Event(
            time=datetime.now(UTC).isoformat(timespec="milliseconds"),
            thread=self.thread,
            step=int(self.usage.get("steps", 0)),
            node=node,
            action=action,
            decision=decision,
            stop_reason=stop_reason,
            tokens=int(self.usage.get("tokens", 0)),
            seconds=float(self.usage.get("seconds", 0.0)),
            tool_calls=self.tool_calls,
            observation=observation,
            message=message,
        )


def _call(name: Any, args: Any) -> dict[str, Any]:
    return {"tool": name, "args": args}


def _decide(update: dict[str, Any]) -> Described:
    reply = update.get("reply")
    if not isinstance(reply, dict):
        return None, "failed", None
    calls = reply.get("tool_calls") or reply.get("invalid_tool_calls") or []
    if len(calls) == 1:
        return _call(calls[0].get("name"), calls[0].get("args")), "proposed", None
    if calls:
        return {"tools": [c.get("name") for c in calls]}, "proposed", None
    return {"text": clip(reply.get("text", ""))}, "proposed", None


def _validate(update: dict[str, Any]) -> Described:
    action = update.get("action")
    if isinstance(action, dict) and action.get("kind") == "tool":
        return _call(action.get("name"), action.get("args")), "tool", None
    if isinstance(action, dict):
        return {"final": clip(action.get("answer", ""))}, "final", None
    retry = update.get("retry")
    if isinstance(retry, dict):
        return {"why": retry.get("why")}, "retry", None
    return None, "invalid", None


def _gate(update: dict[str, Any]) -> Described:
    if update.get("stop_reason"):
        trace = update.get("trace") or [{}]
        return {"tool": trace[0].get("tool")}, "stopped", None
    call = update.get("call") or {}
    outcome = call.get("outcome")
    if outcome:
        return _call(call.get("tool"), call.get("args")), "refused", clip(outcome.get("error"))
    return _call(call.get("tool"), call.get("args")), "allowed", None


def _execute(update: dict[str, Any]) -> Described:
    call = update.get("call") or {}
    outcome = call.get("outcome") or {}
    decision = "ok" if outcome.get("ok") else "error"
    return {"tool": call.get("tool")}, decision, clip(outcome.get("observation"), 200)


def _observe(update: dict[str, Any]) -> Described:
    trace = update.get("trace") or [{}]
    decision = "stopped" if update.get("stop_reason") else "next"
    return {"tool": trace[0].get("tool")}, decision, None


def _finish(update: dict[str, Any]) -> Described:
    return {"final": clip(update.get("answer", ""))}, "answered", None


def _stop(_update: dict[str, Any]) -> Described:
    return None, "stopped", None


def _interrupt(update: dict[str, Any]) -> Described:
    found = list(update.get("interrupts") or ())
    value = getattr(found[0], "value", {}) if found else {}
    value = value if isinstance(value, dict) else {}
    action = {"kind": value.get("kind"), **_call(value.get("tool"), value.get("args"))}
    return action, "paused", None


def _other(_update: dict[str, Any]) -> Described:
    return None, None, None


_DESCRIBE: dict[str, Callable[[dict[str, Any]], Described]] = {
    "decide": _decide,
    "validate": _validate,
    "gate": _gate,
    "execute": _execute,
    "observe": _observe,
    "finish": _finish,
    "stop": _stop,
    "__interrupt__": _interrupt,
}
