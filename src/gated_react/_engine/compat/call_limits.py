"""``ModelCallLimitMiddleware`` and ``ToolCallLimitMiddleware``, taken as budgets: the limits a
run's model and tool calls are held to are the policy's (``Budget.max_steps``,
``max_tool_calls`` and ``tool_limits`` for ``run_limit``; their ``thread_`` twins for
``thread_limit``), checked by the gate against what the record of the run (or of every run on
the thread) says was paid and permitted. The middleware never runs as a hook: its counters
would be state channels an editor could rewrite.

A limit the policy sets itself holds beside the middleware's (the tighter wins); one left at
its default gives way to the middleware's. A tool limit's ``exit_behavior="continue"`` (its
default) is ``"observe"`` in ``Policy.on_tool_limit`` for that limit (by its tool, ``"*"`` for
all tools): a call over it does not run, the model reads LangChain's "Tool call limit
exceeded" and goes on. ``"end"`` and ``"error"`` stop the run on the budget (a stop reason,
never an exception).
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
    budget, actions = policy.budget.model_dump(), {}
    held = set(policy.budget.model_fields_set)
    for m in limits:
        why = limit_refusal(m)
        if why is not None:
            raise MiddlewareRefused(f"{type(m).__name__} is not taken: {why}")
        for prefix, limit in (("", m.run_limit), ("thread_", m.thread_limit)):
            if limit is not None:
                _tighten(budget, held, _field(prefix, m), max(int(limit), 0))
        if type(m).__name__ == TOOL_LIMIT:
            actions[m.tool_name or "*"] = "observe" if m.exit_behavior == "continue" else "stop"
    on_limit: Any = policy.on_tool_limit
    if actions and "on_tool_limit" not in policy.model_fields_set:
        on_limit = _one_or_each(actions)
    return policy.replace(budget=Budget.model_validate(budget), on_tool_limit=on_limit)


def _one_or_each(actions: dict[str, str]) -> str | dict[str, str]:
    """``Policy.on_tool_limit`` for what each limit does: one word when they agree (a cap
    no middleware names then does the same), else each by its tool (``"*"``: the global)."""
    kinds = set(actions.values())
    if len(kinds) == 1 and ("*" in actions or kinds == {"stop"}):
        return kinds.pop()
    return actions


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
