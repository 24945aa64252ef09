"""Shared builders for tests: hand-made states, scripted runs, the support toolkit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool

from gated_react import Policy, build_graph
from gated_react._engine.admissions import ADMITTED
from gated_react._engine.call_keys import args_hash, loop_key
from gated_react._engine.deps import NodeDeps
from gated_react.protocols import PROTOCOLS
from gated_react.state import State
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

REFUND_GOAL = (
    "User 42 asked: can I get a refund for my subscription now? "
    "Check profile, billing and policy; answer with the USD amount and the reason."
)
REFUND_42 = [
    call("get_user_profile", user_id=42),
    call("get_user_billing", user_id=42),
    call("search_policy", query="refund pro monthly"),
    "Yes. Anna's Pro monthly plan was first paid 10 days ago, within the 14-day window: "
    "a refund of USD 49.00 goes back to the original payment method.",
]


def policy(**fields: Any) -> Policy:
    """A Policy; budget fields (max_steps, ...) may be given at top level."""
    return Policy().replace(**fields)


def node_deps(model: Any, tools: Sequence[Any], chosen: Policy, *args: Any) -> NodeDeps:
    """``NodeDeps.build`` with the protocol the policy names, as ``build_graph`` picks it."""
    return NodeDeps.build(model, tools, chosen, *args, protocol=PROTOCOLS[chosen.protocol])


def deps(
    replies: Sequence[Any] = (), tools: Sequence[BaseTool] = SUPPORT_TOOLS, **fields: Any
) -> NodeDeps:
    return node_deps(ScriptedChatModel(replies=list(replies)), tools, policy(**fields))


def state(**fields: Any) -> State:
    """A hand-built state; goal defaults to the refund goal."""
    return State.model_validate({"goal": REFUND_GOAL, **fields})


def admitted(parts: NodeDeps, current: State, config: Any = None) -> State:
    """A hand-built state as if the gate of ``parts`` had just let its calls through: the
    proof ``execute`` takes before it runs them unchecked (``_engine/admissions.py``)."""
    ADMITTED.grant(parts.admission_scope, config or {}, current.calls)
    return current


def run(
    replies: Sequence[Any],
    tools: Sequence[BaseTool] = SUPPORT_TOOLS,
    goal: str = REFUND_GOAL,
    **fields: Any,
) -> dict[str, Any]:
    """Run a whole graph with a scripted model and return invoke's result."""
    graph = build_graph(ScriptedChatModel(replies=list(replies)), tools, policy=policy(**fields))
    return graph.invoke({"goal": goal})


def logs(history: list[dict[str, Any]], steps: int | None = None) -> dict[str, Any]:
    """History with the matching trace, usage and loop keys, as a live run has them."""
    actions = [h["action"] for h in history]
    trace = [
        {"step": h["step"], "tool": a["name"], "args_hash": args_hash(a["args"]), "ok": True}
        for h, a in zip(history, actions, strict=True)
    ]
    usage = {
        "steps": len(history) if steps is None else steps,
        "tool_calls": len(history),
        "per_tool": dict(Counter(a["name"] for a in actions)),
    }
    seen = [loop_key(a["name"], a["args"]) for a in actions]
    return {"history": history, "trace": trace, "usage": usage, "seen": seen}


def history_entry(step: int, tool: str, observation: Any = "ok", **args: Any) -> dict[str, Any]:
    return {
        "step": step,
        "action": {"kind": "tool", "name": tool, "args": args, "id": None},
        "observation": observation,
    }


def as_another_process() -> None:
    """Forget every step this process's gates admitted, as a process that continues a thread
    another one left (after a crash) knows none of them."""
    ADMITTED._held.clear()
