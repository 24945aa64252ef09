"""What each node's update says in an event: its action (the call, the calls, the answer) and
its observation (a result, a refusal), read from the step in hand as stored."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gated_react.errors import one_line

Described = tuple[dict[str, Any] | None, str | None]  # action, observation
Step = dict[str, Any]
"""The step in hand as stored (``state.Step`` as plain JSON)."""


def describe(node: str, step: Step, update: dict[str, Any], branch: Any) -> Described:
    """What ``node``'s update shows: its action and observation (none for a node unknown)."""
    return _DESCRIBE.get(node, _other)(step, update, branch)


def clip(value: Any, limit: int = 120) -> str:
    """A short one-line text of any value."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def said(update: dict[str, Any], kind: str) -> list[str]:
    """The text of each message of ``kind`` an update writes."""
    return [m["text"] for m in update.get("messages") or () if m.get("type") == kind]


def _call(name: Any, args: Any) -> dict[str, Any]:
    return {"tool": name, "args": args}


def _decide(step: Step, _update: dict[str, Any], _branch: Any) -> Described:
    reply = step.get("reply")
    if not isinstance(reply, dict) or step.get("ending"):
        return None, None
    calls = reply.get("tool_calls") or reply.get("invalid_tool_calls") or []
    if len(calls) == 1:
        return _call(calls[0].get("name"), calls[0].get("args")), None
    if calls:
        return {"tools": [c.get("name") for c in calls]}, None
    return {"text": clip(reply.get("text", ""))}, None


def _validate(step: Step, _update: dict[str, Any], branch: Any) -> Described:
    if branch == "tool":
        return _calls(step.get("calls") or [{}]), None
    if branch == "final":
        return {"final": clip((step.get("answer") or {}).get("text", ""))}, None
    if branch == "retry":
        return {"why": (step.get("retry") or {}).get("why")}, None
    return None, None


def _gate(step: Step, _update: dict[str, Any], branch: Any) -> Described:
    calls = step.get("calls") or [{}]
    if branch == "stop":
        stopper = _stopper(step)
        return ({"tool": stopper.get("tool")} if stopper else None), None
    refusals = [_shown(call) for call in calls if call.get("shown")]
    observation = clip(refusals[0] if len(refusals) == 1 else refusals) if refusals else None
    return _calls(calls), observation


def _stopper(step: Step) -> dict[str, Any] | None:
    """The call that stopped the step, if one did."""
    wanted = (step.get("ending") or {}).get("call")
    return next((c for c in step.get("calls") or () if c.get("id") == wanted), None)


def _shown(call: dict[str, Any]) -> str:
    """What the model is shown of a call the gate settled: a refusal's reason, else the text
    (a reminder, a human's answer)."""
    shown = call.get("shown") or {}
    return str(shown.get("error") or shown.get("text") or "")


def _execute(step: Step, update: dict[str, Any], _branch: Any) -> Described:
    calls = step.get("calls") or [{}]
    ending = step.get("ending") or {}
    results = said(update, "tool")
    shown: Any = results[0] if len(results) == 1 else results
    if ending and not results:  # nothing came back (an outcome unknown): why, not "null"
        shown = ending.get("reason")
    return _calls(calls, args=False), clip(shown, 200)


def execute_word(step: Step) -> str:
    """``ok`` when every call of the step ran and returned, else ``error``."""
    calls = step.get("calls") or [{}]
    fine = all((c.get("outcome") or {}).get("ok") for c in calls)
    return "ok" if fine and not step.get("ending") else "error"


def _calls(calls: list[dict[str, Any]], *, args: bool = True) -> dict[str, Any]:
    """One call as ``{"tool", "args"}``, several as ``{"tools": [names]}``."""
    if len(calls) > 1:
        return {"tools": [c.get("tool") for c in calls]}
    call = calls[0]
    return _call(call.get("tool"), call.get("args")) if args else {"tool": call.get("tool")}


def _observe(step: Step, _update: dict[str, Any], _branch: Any) -> Described:
    return _calls(step.get("calls") or [{}], args=False), None


def _finish(step: Step, update: dict[str, Any], _branch: Any) -> Described:
    answer = (step.get("answer") or {}).get("text")
    if answer is None:
        texts = said(update, "ai")
        answer = texts[-1] if texts else ""
    return {"final": clip(answer)}, None


def _other(_step: Step, _update: dict[str, Any], _branch: Any) -> Described:
    return None, None


_DESCRIBE: dict[str, Callable[[Step, dict[str, Any], Any], Described]] = {
    "decide": _decide,
    "validate": _validate,
    "gate": _gate,
    "execute": _execute,
    "observe": _observe,
    "finish": _finish,
}
