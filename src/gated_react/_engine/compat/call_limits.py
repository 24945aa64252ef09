"""``ModelCallLimitMiddleware`` and ``ToolCallLimitMiddleware``, taken as budgets: the limit a
run's model and tool calls are held to is the policy's (``Budget.max_steps``,
``Budget.max_tool_calls``, ``Budget.tool_limits``), checked by the gate against what the run's
record says was paid and permitted. The middleware never runs as a hook: its counters would be
state channels an editor could rewrite.

The tighter of a middleware's ``run_limit`` and the policy's own budget holds. A tool limit's
``exit_behavior="continue"`` (its default) is ``Policy.on_tool_limit="observe"``: a call over
the limit does not run, the model reads LangChain's "Tool call limit exceeded" and goes on.
``"end"`` and ``"error"`` stop the run on the budget (a stop reason, never an exception).
``thread_limit`` is refused: budgets hold per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gated_react.errors import MiddlewareRefused
from gated_react.policy import Policy

MODEL_LIMIT = "ModelCallLimitMiddleware"
TOOL_LIMIT = "ToolCallLimitMiddleware"
NAMES = frozenset({MODEL_LIMIT, TOOL_LIMIT})
"""The classes taken as budgets (never run as hooks)."""


def limit_refusal(m: Any) -> str | None:
    """Why a call-limit middleware cannot be taken, or None."""
    if getattr(m, "thread_limit", None) is not None:
        return (
            f"thread_limit={m.thread_limit} has no equivalent here (budgets hold per run, "
            "across its resumes): keep run_limit, and count a thread's runs in the app"
        )
    limit = getattr(m, "run_limit", None)
    if limit is None:
        return "it sets no run_limit (budgets hold per run)"
    if type(m).__name__ == MODEL_LIMIT and limit < 1:
        return f"run_limit={limit} lets the model make no call: a run needs one"
    return None


def with_limits(policy: Policy, stack: Sequence[Any]) -> Policy:
    """The policy held to the call limits ``stack`` sets (the tighter of each pair)."""
    limits = [m for m in stack if type(m).__name__ in NAMES]
    if not limits:
        return policy
    budget = policy.budget
    steps, calls, caps = budget.max_steps, budget.max_tool_calls, dict(budget.tool_limits)
    behaviours = set()
    for m in limits:
        why = limit_refusal(m)
        if why is not None:
            raise MiddlewareRefused(f"{type(m).__name__} is not taken: {why}")
        limit = int(m.run_limit)
        if type(m).__name__ == MODEL_LIMIT:
            steps = min(steps, limit)
            continue
        behaviours.add(m.exit_behavior == "continue")
        if m.tool_name is None:
            calls = min(calls, limit)
        else:
            caps[m.tool_name] = min(caps.get(m.tool_name, limit), limit)
    if len(behaviours) > 1:
        raise MiddlewareRefused(
            f"{TOOL_LIMIT} is not taken: one continues past its limit and another ends the "
            "run (Policy.on_tool_limit is one for the run): give them the same exit_behavior"
        )
    observe = behaviours == {True}
    return policy.replace(
        max_steps=steps,
        max_tool_calls=calls,
        tool_limits=caps,
        on_tool_limit="observe" if observe else policy.on_tool_limit,
    )
