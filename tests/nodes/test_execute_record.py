"""A state edit of one channel buys nothing, and an honest step is never taken for a crash.

The attacks an outside tester ran (December 2026) through a real SqliteSaver, each of which
worked before its fix: ``calls`` written back after a completed step ran that call again,
uncounted, past ``max_tool_calls``, its tool limit and loop detection (4 times under 1), and
asked a human about a non-idempotent repeat as a call that "may already have run"; an edit of
``history_from`` alone, or of ``usage.steps``, reset the run's budgets at every step (31 tool
calls under 2); a step held before ``execute`` in the same process stopped a tool that never
ran with ``tool_outcome_unknown`` and asked an approved call again.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.types import Command

from gated_react import Budget, Policy, Price, build_graph
from gated_react.graph import GatedGraph
from gated_react.testing import ScriptedChatModel, call

from ..support.fakes import RAN, lookup, pay

CFG: Any = {"configurable": {"thread_id": "t"}}


def _graph(saver: Any, replies: list[Any], policy: Policy) -> GatedGraph:
    return build_graph(
        ScriptedChatModel(replies=replies), [lookup, pay], policy=policy, checkpointer=saver
    )


def _written_back(step: int, tool_name: str, **args: Any) -> dict[str, Any]:
    """A completed call as the gate had recorded it, written into ``calls`` again."""
    return {"step": step, "tool": tool_name, "args": args, "key": f"k{step}", "id": f"c{step}"}


@pytest.mark.parametrize(
    ("loops", "budget", "stop"),
    [
        ("exact", Budget(max_steps=20, max_tool_calls=5), "loop_detected"),
        ("off", Budget(max_steps=20, max_tool_calls=1), "max_tool_calls"),
        (
            "off",
            Budget(max_steps=20, max_tool_calls=5, tool_limits={"lookup": 1}),
            "tool_limit:lookup",
        ),
    ],
)
def test_a_completed_call_written_back_is_counted_and_checked_again(
    store: Any, loops: str, budget: Budget, stop: str
) -> None:
    policy = Policy(budget=budget, loop_detection=loops)
    graph = _graph(store, [call("lookup", q="x"), *["done"] * 5], policy)
    graph.invoke({"goal": "g"}, CFG, interrupt_after=["observe"])
    assert RAN == ["lookup x"]
    graph.update_state(CFG, {"calls": [_written_back(2, "lookup", q="x")]}, as_node="gate")
    out = graph.invoke(None, CFG)
    assert RAN == ["lookup x"]
    assert out["stop_reason"] == stop
    assert [h["step"] for h in out["history"]] == [1]


def test_a_non_idempotent_repeat_written_back_is_not_asked_as_a_crash(store: Any) -> None:
    """Before: "pay may already have run before the process stopped; approve to run it
    again" about a payment that had finished, and approving paid twice."""
    policy = Policy(require_approval=frozenset({"pay"}), budget=Budget(max_tool_calls=5))
    graph = _graph(store, [call("pay", item="x"), "done"], policy.replace(loop_detection="off"))
    graph.invoke({"goal": "g"}, CFG)
    graph.invoke(Command(resume={"approved": True}), CFG, interrupt_after=["observe"])
    assert RAN == ["pay x"]
    graph.update_state(CFG, {"calls": [_written_back(2, "pay", item="x")]}, as_node="gate")
    asked = graph.invoke(None, CFG)
    (question,) = asked["__interrupt__"]
    assert (question.value["kind"], question.value["args"]) == ("approval", {"item": "x"})
    out = graph.invoke(Command(resume={"approved": False, "reason": "paid already"}), CFG)
    assert RAN == ["pay x"]
    assert out["stop_reason"] == "tool_rejected:pay"


def _edited_each_step(graph: GatedGraph, values: Any) -> dict[str, Any]:
    graph.invoke({"goal": "g"}, CFG, interrupt_after=["observe"])
    for _ in range(12):
        snapshot = graph.get_state(CFG)
        if not snapshot.next:
            break
        graph.update_state(CFG, values(snapshot.values), as_node="observe")  # one channel
        graph.invoke(None, CFG, interrupt_after=["observe"])
    return dict(graph.get_state(CFG).values)


def test_an_edit_of_where_the_runs_history_starts_buys_no_budget(store: Any) -> None:
    budget = Budget(max_steps=3, max_tool_calls=2, max_cost=0.01)
    policy = Policy(budget=budget, prices={"scripted": Price(input=2, output=2)})
    graph = _graph(store, [call("lookup", q=f"i{i}") for i in range(30)], policy)
    state = _edited_each_step(graph, lambda values: {"history_from": len(values["history"])})
    assert len(RAN) == 2
    assert len(state["spend"]) <= 3
    assert state["stop_reason"] in {"max_tool_calls", "max_steps"}


def test_an_edit_of_usage_steps_alone_buys_no_step(store: Any) -> None:
    policy = Policy(budget=Budget(max_steps=3, max_tool_calls=100))
    graph = _graph(store, [call("lookup", q=f"i{i}") for i in range(30)], policy)
    state = _edited_each_step(graph, lambda values: {"usage": {**values["usage"], "steps": 0}})
    assert state["stop_reason"] == "max_steps"
    assert len(state["spend"]) == 3


def test_a_step_held_before_execute_in_this_process_runs_once_unasked(store: Any) -> None:
    graph = _graph(store, [call("pay", item="a"), "done"], Policy())
    graph.invoke({"goal": "pay a"}, CFG, interrupt_before=["execute"])
    out = graph.invoke(None, CFG)
    assert (out["stop_reason"], RAN) == ("success", ["pay a"])
    approving = Policy(require_approval=frozenset({"pay"}))
    other: Any = {"configurable": {"thread_id": "u"}}
    graph = _graph(store, [call("pay", item="b"), "done"], approving)
    graph.invoke({"goal": "pay b"}, other)
    graph.invoke(Command(resume={"approved": True}), other, interrupt_before=["execute"])
    out = graph.invoke(None, other)
    assert "__interrupt__" not in out
    assert (out["stop_reason"], RAN) == ("success", ["pay a", "pay b"])


def test_an_edit_of_the_runs_status_alone_buys_no_budget(store: Any) -> None:
    """Before: ``status`` written at every step opened a new run with fresh budgets each time
    (13 payments under ``max_tool_calls=2``), and the thread ended with no stop reason."""
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    graph = _graph(store, [call("lookup", q=f"i{i}") for i in range(30)], policy)
    state = _edited_each_step(graph, lambda values: {"status": "ok"})
    assert len(RAN) == 2
    assert state["stop_reason"] == "max_tool_calls"


def test_an_edit_of_the_runs_turn_alone_buys_no_budget(store: Any) -> None:
    """Before: ``turn`` moved back to an earlier question made every later message look new,
    and each step opened a run with fresh budgets."""
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    replies = ["first answer", *[call("lookup", q=f"i{i}") for i in range(30)]]
    graph = _graph(store, replies, policy)
    graph.invoke({"messages": [{"role": "user", "content": "one", "id": "h1"}]}, CFG)
    graph.invoke(
        {"messages": [{"role": "user", "content": "two", "id": "h2"}]},
        CFG,
        interrupt_after=["observe"],
    )
    for _ in range(12):
        if not graph.get_state(CFG).next:
            break
        graph.update_state(CFG, {"turn": "h1"}, as_node="observe")
        graph.invoke(None, CFG, interrupt_after=["observe"])
    state = graph.get_state(CFG).values
    assert len(RAN) == 2
    assert state["stop_reason"] == "max_tool_calls"


def test_a_command_that_writes_status_and_goes_to_decide_buys_no_budget(store: Any) -> None:
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    graph = _graph(store, [call("lookup", q=f"i{i}") for i in range(30)], policy)
    graph.invoke({"goal": "g"}, CFG, interrupt_after=["observe"])
    for _ in range(12):
        if not graph.get_state(CFG).next:
            break
        edit = Command(update={"status": "stopped"}, goto="decide")
        graph.invoke(edit, CFG, interrupt_after=["observe"])
    state = graph.get_state(CFG).values
    assert len(RAN) == 2
    assert (state["status"], state["stop_reason"]) == ("stopped", "max_tool_calls")


def _before(graph: GatedGraph, node: str) -> Any:
    """The config of the thread's newest checkpoint whose next node is ``node``."""
    return next(s for s in graph.get_state_history(CFG) if s.next == (node,)).config


def test_a_replay_from_before_the_gate_does_not_pay_again_unasked(store: Any) -> None:
    """Before: time travel to a checkpoint before the gate of a step that had paid ran the
    payment again, unasked (3 payments in 3 replays); a replay from before execute stopped."""
    graph = _graph(store, [call("pay", item="a"), "done", "done"], Policy())
    graph.invoke({"goal": "pay a"}, CFG)
    out = graph.invoke(None, _before(graph, "gate"))
    assert RAN == ["pay a"]
    assert out["stop_reason"] == "tool_outcome_unknown:pay"
    assert "replayed from an earlier checkpoint" in out["message"]


def test_a_replay_under_approval_runs_again_only_once_a_human_says_so(store: Any) -> None:
    policy = Policy(require_approval=frozenset({"pay"}))
    graph = _graph(store, [call("pay", item="a"), "done", "done"], policy)
    graph.invoke({"goal": "pay a"}, CFG)
    graph.invoke(Command(resume={"approved": True}), CFG)
    asked = graph.invoke(None, _before(graph, "gate"))
    (question,) = asked["__interrupt__"]
    assert (question.value["kind"], RAN) == ("approval", ["pay a"])
    asked = graph.invoke(Command(resume={"approved": True}), CFG)  # approves the call...
    (question,) = asked["__interrupt__"]  # ...not knowing it ran on the thread's other branch
    assert (question.value["kind"], RAN) == ("outcome_unknown", ["pay a"])
    assert "replayed from an earlier checkpoint" in question.value["why"]
    out = graph.invoke(Command(resume={"approved": True}), CFG)
    assert (out["stop_reason"], RAN) == ("success", ["pay a", "pay a"])


def test_a_replay_from_before_execute_in_a_new_process_asks_what_came_of_it(
    store: Any,
) -> None:
    policy = Policy(require_approval=frozenset({"pay"}))
    graph = _graph(store, [call("pay", item="a"), "done", "done"], policy)
    graph.invoke({"goal": "pay a"}, CFG)
    graph.invoke(Command(resume={"approved": True}), CFG)
    fresh = _graph(store, ["done", "done"], policy)  # no admission of this process's gate
    asked = fresh.invoke(None, _before(graph, "execute"))
    (question,) = asked["__interrupt__"]
    assert question.value["kind"] == "outcome_unknown"
    assert "replayed from an earlier checkpoint" in question.value["why"]
    assert RAN == ["pay a"]


def test_a_replay_runs_an_idempotent_tool_again(store: Any) -> None:
    graph = _graph(store, [call("lookup", q="x"), "done", "done"], Policy())
    graph.invoke({"goal": "look x up"}, CFG)
    out = graph.invoke(None, _before(graph, "gate"))
    assert (RAN, out["stop_reason"]) == (["lookup x", "lookup x"], "success")
