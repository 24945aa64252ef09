"""Node updates turned into events: what the live view shows and the run log records.

``Tracker`` follows one run through LangGraph's ``stream_mode="updates"`` chunks and keeps the
counters a single update does not carry (tokens and seconds so far, tool calls made).

The decision shown after decide, validate, gate and observe is the branch the graph's own router
(``gated_react.routing``) takes on the node's update, in the word the CLI shows for it: a change
to a node and its router needs no second edit here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from gated_react import routing
from gated_react.errors import one_line
from gated_react.records.run_log import FIELDS
from gated_react.redact import redact

Described = tuple[dict[str, Any] | None, str | None, str | None]  # action, decision, observation

DECIDE_WORDS: dict[routing.AfterDecide, str] = {"reply": "proposed", "stop": "failed"}
"""The decision shown for each branch of ``routing.after_decide``."""
VALIDATE_WORDS: dict[routing.AfterValidate, str] = {
    "tool": "tool",
    "final": "final",
    "retry": "retry",
    "stop": "invalid",
}
"""The decision shown for each branch of ``routing.after_validate``."""
GATE_WORDS: dict[routing.AfterGate, str] = {
    "allowed": "allowed",
    "stop": "stopped",
}
"""The decision shown for each branch of ``routing.after_gate``."""
OBSERVE_WORDS: dict[routing.AfterObserve, str] = {
    "next": "next",
    "direct": "answered",
    "stop": "stopped",
}
"""The decision shown for each branch of ``routing.after_observe``."""


def clip(value: Any, limit: int = 120) -> str:
    """A short one-line text of any value."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def masked(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` with secrets (known shapes and ``secrets``) masked in every string."""
    if isinstance(value, str):
        return redact(value, *secrets)
    if isinstance(value, dict):
        return {key: masked(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [masked(item, secrets) for item in value]
    return value


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
    cost: float | None = None
    """US dollars spent so far; None when unpriced."""
    context: dict[str, Any] | None = None
    """What the run ran under (``State.run_context``), on the event of its first decision."""

    def record(self) -> dict[str, Any]:
        """The run-log line: the fixed fields first, optional ones only when set."""
        out = {name: getattr(self, name) for name in FIELDS}
        out["seconds"] = round(self.seconds, 3)
        out["tool_calls"] = self.tool_calls
        for name in ("observation", "message", "cost", "context"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass
class Tracker:
    """Follows one thread; ``event(node, update)`` for every streamed update."""

    thread: str
    usage: dict[str, Any] = field(default_factory=dict)
    extensions: list[Any] = field(default_factory=list)
    """Budget extensions granted so far (``State.extensions``, as stored)."""
    stop_reason: str | None = None
    secrets: tuple[str, ...] = ()
    """Keys to mask in every text before it is clipped, so no cut leaves part of one."""

    def event(self, node: str, update: Any) -> Event:
        update = masked(
            update if isinstance(update, dict) else {"interrupts": update}, self.secrets
        )
        if isinstance(update.get("usage"), dict):
            self.usage = update["usage"]
        if isinstance(update.get("extensions"), list):
            self.extensions = update["extensions"]
        stop = update.get("stop_reason")
        self.stop_reason = stop or self.stop_reason
        action, decision, observation = _DESCRIBE.get(node, _other)(update)
        if node == "__interrupt__":  # the node that asked: gate (approval) or execute
            node = "execute" if (action or {}).get("kind") == "outcome_unknown" else "gate"
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
            context=update.get("run_context"),
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
        context: dict[str, Any] | None = None,
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
            tool_calls=int(self.usage.get("tool_calls") or 0),
            observation=observation,
            message=message,
            cost=_dollars(self.usage.get("cost")),
            context=context,
        )


def _dollars(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _call(name: Any, args: Any) -> dict[str, Any]:
    return {"tool": name, "args": args}


def _route(update: dict[str, Any]) -> routing.Route:
    """A node's update as the routers read channels (plain JSON, as stored)."""
    return cast("routing.Route", update)


def _decide(update: dict[str, Any]) -> Described:
    decision = DECIDE_WORDS[routing.after_decide(_route(update))]
    reply = update.get("reply")
    if not isinstance(reply, dict):
        return None, decision, None
    calls = reply.get("tool_calls") or reply.get("invalid_tool_calls") or []
    if len(calls) == 1:
        return _call(calls[0].get("name"), calls[0].get("args")), decision, None
    if calls:
        return {"tools": [c.get("name") for c in calls]}, decision, None
    return {"text": clip(reply.get("text", ""))}, decision, None


def _validate(update: dict[str, Any]) -> Described:
    branch = routing.after_validate(_route(update))
    decision = VALIDATE_WORDS[branch]
    action = update.get("action") or {}
    if branch == "tool" and action.get("kind") == "tools":
        return {"tools": [c.get("name") for c in action.get("calls") or ()]}, decision, None
    if branch == "tool":
        return _call(action.get("name"), action.get("args")), decision, None
    if branch == "final":
        return {"final": clip(action.get("answer", ""))}, decision, None
    if branch == "retry":
        return {"why": (update.get("retry") or {}).get("why")}, decision, None
    return None, decision, None


def _gate(update: dict[str, Any]) -> Described:
    branch = routing.after_gate(_route(update))
    decision = GATE_WORDS[branch]
    if branch == "stop":  # the stopping call is traced last (after any budget extended first)
        trace = update.get("trace") or [{}]
        return {"tool": trace[-1].get("tool")}, decision, None
    calls = update.get("calls") or [{}]
    action = _calls(calls)
    return action, decision, None


def _execute(update: dict[str, Any]) -> Described:
    calls = update.get("calls") or [{}]
    outcomes = [c.get("outcome") or {} for c in calls]
    decision = "ok" if all(o.get("ok") for o in outcomes) else "error"
    # A call that never returned (its outcome unknown after a crash) has no observation: its
    # error says why (it read "-> null").
    shown = [
        o["observation"] if o.get("observation") is not None else o.get("error") for o in outcomes
    ]
    return _calls(calls, args=False), decision, clip(shown[0] if len(shown) == 1 else shown, 200)


def _calls(calls: list[dict[str, Any]], *, args: bool = True) -> dict[str, Any]:
    """One call as ``{"tool", "args"}``, several as ``{"tools": [names]}``."""
    if len(calls) > 1:
        return {"tools": [c.get("tool") for c in calls]}
    call = calls[0]
    return _call(call.get("tool"), call.get("args")) if args else {"tool": call.get("tool")}


def _observe(update: dict[str, Any]) -> Described:
    trace = update.get("trace") or [{}]
    decision = OBSERVE_WORDS[routing.after_observe(_route(update))]
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
