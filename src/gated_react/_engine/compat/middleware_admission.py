"""Which LangChain middleware ``build_graph`` takes, decided at build time.

A middleware whose job the gate already does, or that would get past it, is refused with one
line naming the equivalent (``MiddlewareRefused``): the policy stays the one place that says
what runs, and the run records it (``run_context.policy``). So is one that calls a model of
its own (the budgets would not see it), keeps state channels of its own, or runs at the start
or end of a run (``before_agent``/``after_agent``: a run here may pause, resume in another
process, or stop at any node). ``docs/guides/chat.md`` ("Middleware") has the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import middleware as shipped
from langchain.agents.middleware import AgentMiddleware, AgentState

from gated_react._engine.compat.call_limits import NAMES as LIMITS
from gated_react._engine.compat.call_limits import limit_refusal
from gated_react.errors import MiddlewareRefused

_OWN_MODEL = "calls a model of its own, which no budget counts"
REFUSED: dict[str, str] = {
    "LLMToolSelectorMiddleware": (
        f"{_OWN_MODEL}; choose the model's tools with Policy(allow={{...}})"
    ),
    "LLMToolEmulator": (
        f"{_OWN_MODEL} in place of the tools; test with fake tools or gated_react.testing"
    ),
    "AutoModeMiddleware": (
        f"{_OWN_MODEL} to classify calls; the gate decides: Policy(allow=..., require_approval=...)"
    ),
    "ModelRouterMiddleware": (
        f"{_OWN_MODEL} before the run; route first, then build_graph(<chosen model>, tools)"
    ),
    "ProviderToolSearchMiddleware": (
        "adds provider-side tools, which run where the gate cannot see them; pass tools to "
        "build_graph"
    ),
    "ShellToolMiddleware": (
        "opens a shell at the run's start and closes it at its end (before_agent/after_agent); "
        "give a shell tool under approval: Policy(require_approval={'shell'})"
    ),
    "TodoListMiddleware": (
        "its write_todos tool writes the graph's state (a Command); only gated-react's nodes do"
    ),
}
"""Each shipped class ``build_graph`` refuses, and the line that says what to use instead."""

SAME = frozenset(
    {
        "HumanInTheLoopMiddleware",
        "ModelCallLimitMiddleware",
        "ToolCallLimitMiddleware",
        "SummarizationMiddleware",
        "PIIMiddleware",
        "ModelFallbackMiddleware",
        "ModelRetryMiddleware",
        "ModelRefusalMiddleware",
        "ContextEditingMiddleware",
        "ToolRetryMiddleware",
        "ToolErrorMiddleware",
        "FilesystemFileSearchMiddleware",
    }
)
"""The shipped classes that run as they do under ``create_agent`` (``docs`` says where they
run and what they may not do)."""


def admitted(stack: Sequence[Any]) -> tuple[AgentMiddleware[Any, Any], ...]:
    """The middleware, in order, or ``MiddlewareRefused`` for the first that is not taken."""
    if not isinstance(stack, Sequence) or isinstance(stack, str | AgentMiddleware):
        raise TypeError(f"expected a list of middleware, got {type(stack).__name__}")
    names: set[str] = set()
    for m in stack:
        if not isinstance(m, AgentMiddleware):
            raise TypeError(
                f"middleware must be LangChain AgentMiddleware instances, got {type(m).__name__}"
            )
        why = refusal(m)
        if why is not None:
            raise MiddlewareRefused(f"{type(m).__name__} is not taken: {why}")
        if m.name in names:
            raise ValueError(f"two middleware are named {m.name!r}; names must be unique")
        names.add(m.name)
    return tuple(stack)


def refusal(m: AgentMiddleware[Any, Any]) -> str | None:
    """Why ``m`` is refused, naming the equivalent; None when it is taken."""
    name = type(m).__name__
    if name == "HumanInTheLoopMiddleware" or name in LIMITS:
        # taken as policy (``reviews.py``, ``call_limits.py``): none of their hooks runs
        return limit_refusal(m) if name in LIMITS else None
    for cls in type(m).__mro__:
        if cls.__module__.startswith("langchain.agents.middleware") and cls.__name__ in REFUSED:
            return REFUSED[cls.__name__]
    if _has(m, "before_agent") or _has(m, "after_agent"):
        return (
            "before_agent/after_agent hooks have no place here (a run may pause, resume in another "
            "process, or stop at any node); do that work before invoke and after it returns"
        )
    own = sorted(
        set(getattr(m.state_schema, "__annotations__", {})) - set(AgentState.__annotations__)
    )
    if own:
        return (
            f"it keeps state channels of its own ({', '.join(own)}); gated-react's state is closed"
        )
    for hook in ("before_model", "after_model"):
        jumps = set(_jumps(m, hook)) - {"end"}
        if jumps:
            return (
                f"its {hook} may jump to {sorted(jumps)}, past the gate; only the gate routes a run"
            )
    return None


def _has(m: AgentMiddleware[Any, Any], hook: str) -> bool:
    return any(
        getattr(type(m), name) is not getattr(AgentMiddleware, name) for name in (hook, f"a{hook}")
    )


def _jumps(m: AgentMiddleware[Any, Any], hook: str) -> list[str]:
    found: list[str] = []
    for name in (hook, f"a{hook}"):
        method = getattr(type(m), name)
        if method is not getattr(AgentMiddleware, name):
            found += getattr(method, "__can_jump_to__", [])
    return found


def shipped_classes() -> list[str]:
    """Every middleware class ``langchain.agents.middleware`` ships (what the table covers)."""
    return sorted(
        name
        for name in shipped.__all__
        if isinstance(getattr(shipped, name), type)
        and issubclass(getattr(shipped, name), AgentMiddleware)
        and getattr(shipped, name) is not AgentMiddleware
    )
