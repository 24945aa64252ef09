"""A step under approval replayed after its call ran: the call is not asked about, nor run,
again, whatever the human answered the first time (found by a tester: a replay of the gate
asked the approval question afresh, and an edit there paid again)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from gated_react import Policy, build_graph, resume, run
from gated_react.testing import ScriptedChatModel, call

PAID: list[str] = []


@tool
def pay(to: str, amount: int) -> str:
    """Pay someone."""
    PAID.append(f"{to} {amount}")
    return f"paid {to} {amount}"


@pytest.mark.parametrize(
    "first",
    [{"approved": True}, {"approved": True, "args": {"to": "bob", "amount": 100}}],
    ids=["approved", "edited"],
)
def test_a_replayed_gate_asks_nothing_and_pays_nothing_again(first: dict[str, Any]) -> None:
    PAID.clear()
    model = ScriptedChatModel(replies=[call("pay", to="bob", amount=120), "done", "done"])
    policy = Policy(require_approval=frozenset({"pay"}))
    graph = build_graph(model, [pay], policy=policy, checkpointer=InMemorySaver())
    cfg: Any = {"configurable": {"thread_id": "t"}}
    assert run(graph, "pay bob", thread_id="t")["pending"]
    assert resume(graph, "t", first)["stop_reason"] == "success"
    assert len(PAID) == 1
    before_gate = next(s for s in graph.get_state_history(cfg) if s.next == ("gate",))
    replayed = graph.invoke(None, before_gate.config)
    assert "__interrupt__" not in replayed  # not asked again
    state = graph.get_state(cfg)
    if state.interrupts:  # had it asked, an edited answer must still not pay
        graph.invoke(Command(resume={"approved": True, "args": {"to": "bob", "amount": 90}}), cfg)
    assert len(PAID) == 1
