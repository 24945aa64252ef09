"""``ModelCallLimitMiddleware`` and ``ToolCallLimitMiddleware``, taken as budgets: the limits a
run's model and tool calls are held to are the policy's (``Budget.max_steps``,
``max_tool_calls`` and ``tool_limits`` for ``run_limit``; their ``thread_`` twins for
``thread_limit``), checked by the gate against what the record of the run (or of every run on
the thread) says was paid and permitted. The middleware never runs as a hook: its counters
would be state channels an editor could rewrite.

A limit the policy sets itself holds beside the middleware's (the tighter wins); one left at
its default gives way to the middleware's. A tool limit's
``exit_behavior="continue"`` (its default) is ``Policy.on_tool_limit="observe"``: a call over
the limit does not run, the model reads LangChain's "Tool call limit exceeded" and goes on.
``"end"`` and ``"error"`` stop the run on the budget (a stop reason, never an exception).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gated_react.errors import MiddlewareRefused
from gated_react.policy import Budget, Policy

MODEL_LIMIT = "ModelCallLimitMiddleware"
TOOL_LIMIT = "ToolCallLimitMiddleware"
NAMES = frozenset({MODEL_LIMIT, TOOL_LIMIT})
"""The classes taken as budgets (never run as hooks)."""


def limit_refusal(m: Any) -> str | None:
    """Why a call-limit middleware cannot be taken, or None."""
    limits = {"run_limit": getattr(m, "run_limit", None)}
    limits["thread_limit"] = getattr(m, "thread_limit", None)
    if all(limit is None for limit in limits.values()):
        return "it sets neither run_limit nor thread_limit"
    for name, limit in limits.items():
        if type(m).__name__ == MODEL_LIMIT and limit is not None and limit < 1:
            return f"{name}={limit} lets the model make no call: a run needs one"
    return None


def with_limits(policy: Policy, stack: Sequence[Any]) -> Policy:
    """The policy held to the call limits ``stack`` sets: a limit the policy sets itself holds
    with the middleware's (the tighter wins); one it leaves at its default is the middleware's
    (``create_agent`` has no default budget). Its ``exit_behavior`` is ``on_tool_limit``
    unless the policy sets that itself."""
    limits = [m for m in stack if type(m).__name__ in NAMES]
    if not limits:
        return policy
    budget, behaviours = policy.budget.model_dump(), set()
    held = set(policy.budget.model_fields_set)
    for m in limits:
        why = limit_refusal(m)
        if why is not None:
            raise MiddlewareRefused(f"{type(m).__name__} is not taken: {why}")
        for prefix, limit in (("", m.run_limit), ("thread_", m.thread_limit)):
            if limit is not None:
                _tighten(budget, held, _field(prefix, m), max(int(limit), 0))
        if type(m).__name__ == TOOL_LIMIT:
            behaviours.add(m.exit_behavior == "continue")
    if len(behaviours) > 1:
        raise MiddlewareRefused(
            f"{TOOL_LIMIT} is not taken: one continues past its limit and another ends the "
            "run (Policy.on_tool_limit is one for the run): give them the same exit_behavior"
        )
    on_limit = "observe" if behaviours == {True} else "stop"
    if "on_tool_limit" in policy.model_fields_set or not behaviours:
        on_limit = policy.on_tool_limit
    return policy.replace(budget=Budget.model_validate(budget), on_tool_limit=on_limit)


def _field(prefix: str, m: Any) -> tuple[str, str | None]:
    """The budget field a middleware's limit is (and the tool, for a tool's cap)."""
    if type(m).__name__ == MODEL_LIMIT:
        return f"{prefix}max_steps", None
    if m.tool_name is None:
        return f"{prefix}max_tool_calls", None
    return f"{prefix}tool_limits", str(m.tool_name)


def _tighten(
    budget: dict[str, Any], held: set[str], field: tuple[str, str | None], limit: int
) -> None:
    """``budget`` (as plain data) with the limit: the tighter of it and one already held."""
    name, tool = field
    if tool is not None:
        caps = budget[name]
        caps[tool] = min(caps.get(tool, limit), limit)
        return
    current = budget[name]
    budget[name] = limit if name not in held or current is None else min(current, limit)
    held.add(name)
