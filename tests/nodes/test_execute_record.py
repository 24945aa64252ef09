"""A state edit buys nothing, and an honest step is never taken for a crash: the run's record
(permits, ``started``/``done``, what was paid), not the state, says what was let through, what
ran and what was spent.

The attacks an outside tester ran (December 2026) through a real SqliteSaver, each of which
worked before its fix: a completed call written back into the step ran again, uncounted, past
``max_tool_calls``, its tool limit and loop detection (4 times under 1), and a non-idempotent
repeat was asked about as a call that "may already have run"; one-channel edits reset the run's
budgets at every step (31 tool calls under 2); a step held before ``execute`` stopped a tool that
never ran with ``tool_outcome_unknown``, or asked an approved call again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from gated_react import Budget, Policy, build_graph, read
from gated_react.graph import GatedGraph
from gated_react.testing import ScriptedChatModel, call

from ..support.fakes import RAN, lookup, pay
from ..support.helpers import as_another_process

CFG: Any = {"configurable": {"thread_id": "t"}}


def _graph(saver: Any, replies: list[Any], policy: Policy) -> GatedGraph:
    return build_graph(
        ScriptedChatModel(replies=replies), [lookup, pay], policy=policy, checkpointer=saver
    )


def _question(graph: GatedGraph) -> str:
    messages = graph.get_state(CFG).values["messages"]
    return str(next(m.id for m in reversed(messages) if isinstance(m, HumanMessage)))


def _last_call(graph: GatedGraph) -> dict[str, Any]:
    messages = graph.get_state(CFG).values["messages"]
    found = next(m for m in reversed(messages) if isinstance(m, AIMessage) and m.tool_calls)
    return dict(found.tool_calls[0])


def _written_back(graph: GatedGraph, same_id: bool) -> dict[str, Any]:
    """The step's completed call written into the step again (under its own id, or a new
    one), as the gate had handed it to execute."""
    done = _last_call(graph)
    called = {"id": done["id"] if same_id else "again", "tool": done["name"], "args": done["args"]}
    return {"step": {"run": _question(graph), "calls": [called]}}


LIMITS = [
    ("exact", Budget(max_steps=20, max_tool_calls=5), "loop_detected"),
    ("off", Budget(max_steps=20, max_tool_calls=1), "max_tool_calls"),
    ("off", Budget(max_steps=20, max_tool_calls=5, tool_limits={"lookup": 1}), "tool_limit:lookup"),
]


@pytest.mark.parametrize(("loops", "budget", "stop"), LIMITS, ids=[case[2] for case in LIMITS])
def test_a_completed_call_written_back_is_counted_and_checked_again(
    store: Any, loops: str, budget: Budget, stop: str
) -> None:
    """Under a new id, a completed call written back into the step is a new proposal: the
    gate's checks again (loops, budgets), and it does not run uncounted."""
    policy = Policy(budget=budget, loop_detection=loops)
    graph = _graph(store, [call("lookup", q="x"), *["done"] * 5], policy)
    graph.invoke({"goal": "g"}, CFG, interrupt_after=["observe"])
    assert RAN == ["lookup x"]
    graph.update_state(CFG, _written_back(graph, same_id=False), as_node="gate")
    out = graph.invoke(None, CFG)
    assert RAN == ["lookup x"]
    assert out["stop_reason"] == stop
    assert read(graph, "t")["usage"]["tool_calls"] == 1


@pytest.mark.parametrize(("loops", "budget", "stop"), LIMITS, ids=[case[2] for case in LIMITS])
def test_a_completed_call_written_back_under_its_own_id_is_answered_from_the_record(
    store: Any, loops: str, budget: Budget, stop: str
) -> None:
    """Under its own id, the record says the call ran and returned: it is answered with what
    it returned, never run or counted again, and the run goes on."""
    policy = Policy(budget=budget, loop_detection=loops)
    graph = _graph(store, [call("lookup", q="x"), *["done"] * 5], policy)
    graph.invoke({"goal": "g"}, CFG, interrupt_after=["observe"])
    graph.update_state(CFG, _written_back(graph, same_id=True), as_node="gate")
    out = graph.invoke(None, CFG)
    del stop
    assert RAN == ["lookup x"]
    assert out["stop_reason"] == "success"
    assert read(graph, "t")["usage"]["tool_calls"] == 1


def test_a_non_idempotent_repeat_written_back_is_not_asked_as_a_crash(store: Any) -> None:
    """Before: "pay may already have run before the process stopped; approve to run it
    again" about a payment that had finished, and approving paid twice. Under a new id it is
    a new proposal, asked about as one; under its own id, the record says it is done, and
    the model is shown what it returned."""
    policy = Policy(require_approval=frozenset({"pay"}), budget=Budget(max_tool_calls=5))
    graph = _graph(
        store, [call("pay", item="x"), "done", "done"], policy.replace(loop_detection="off")
    )
    graph.invoke({"goal": "g"}, CFG)
    graph.invoke(Command(resume={"approved": True}), CFG, interrupt_after=["observe"])
    assert RAN == ["pay x"]
    graph.update_state(CFG, _written_back(graph, same_id=False), as_node="gate")
    asked = graph.invoke(None, CFG)
    (question,) = asked["__interrupt__"]
    assert (question.value["kind"], question.value["args"]) == ("approval", {"item": "x"})
    out = graph.invoke(Command(resume={"approved": False, "reason": "paid already"}), CFG)
    assert RAN == ["pay x"]
    assert out["stop_reason"] == "tool_rejected:pay"


def test_the_same_call_written_back_is_answered_from_the_record(store: Any) -> None:
    policy = Policy(require_approval=frozenset({"pay"}), budget=Budget(max_tool_calls=5))
    graph = _graph(
        store, [call("pay", item="x"), "done", "done"], policy.replace(loop_detection="off")
    )
    graph.invoke({"goal": "g"}, CFG)
    graph.invoke(Command(resume={"approved": True}), CFG, interrupt_after=["observe"])
    graph.update_state(CFG, _written_back(graph, same_id=True), as_node="gate")
    out = graph.invoke(None, CFG)
    assert "__interrupt__" not in out
    assert (out["stop_reason"], RAN) == ("success", ["pay x"])
    assert [m.text for m in out["messages"] if m.type == "tool"] == ["paid x", "paid x"]


def _edited_each_step(graph: GatedGraph, values: Callable[[dict[str, Any]], Any]) -> Any:
    """The thread after ``values(state)`` was written as observe (one write) at every step."""
    graph.invoke({"goal": "g"}, CFG, interrupt_after=["observe"])
    for _ in range(12):
        snapshot = graph.get_state(CFG)
        if not snapshot.next:
            break
        graph.update_state(CFG, values(snapshot.values), as_node="observe")
        graph.invoke(None, CFG, interrupt_after=["observe"])
    return read(graph, "t")


@pytest.mark.parametrize(
    "edit",
    [{"step": None}, {"step": {"run": "another"}}, {"message": "edited", "stop_reason": None}],
    ids=["step cleared", "step of another run", "end cleared"],
)
def test_an_edit_of_the_step_or_the_end_buys_no_step(store: Any, edit: dict[str, Any]) -> None:
    """What replaced ``usage`` and ``history_from`` (before: ``usage.steps = 0`` at every step
    ran 21 steps under ``max_steps=3``, an edit of ``history_from`` 31 tool calls under 2)."""
    policy = Policy(budget=Budget(max_steps=3, max_tool_calls=100))
    graph = _graph(store, [call("lookup", q=f"i{i}") for i in range(30)], policy)
    result = _edited_each_step(graph, lambda values: edit)
    assert result["stop_reason"] == "max_steps"
    assert result["usage"]["steps"] == 3
    assert len(RAN) <= 3


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


def test_a_step_held_before_execute_runs_after_many_other_admissions(store: Any) -> None:
    """Issue 43: after 5,000 other admissions in the process (the registry kept 4,096), a step
    held before execute was asked about as ``outcome_unknown`` though it never ran. The
    permit is in the run's record, however many others the process writes."""
    from gated_react.nodes.gate import gate

    from ..support.helpers import deps, state
    from .hand import proposal, saved

    approving = Policy(require_approval=frozenset({"pay"}))
    graph = _graph(store, [call("pay", item="a"), "done"], approving)
    graph.invoke({"goal": "pay a"}, CFG)
    graph.invoke(Command(resume={"approved": True}), CFG, interrupt_before=["execute"])
    parts = deps(tools=[lookup, pay])
    asked = proposal(("lookup", {"q": "other"}))
    for n in range(5_000):  # other threads' steps, each let through by this process's gate
        gate(
            state(messages=[asked["message"]], calls=asked["calls"]),
            saved(store, f"o{n}"),
            deps=parts,
        )
    out = graph.invoke(None, CFG)
    assert "__interrupt__" not in out, [i.value["kind"] for i in out["__interrupt__"]]
    assert (out["stop_reason"], RAN) == ("success", ["pay a"])


def test_an_edit_of_the_runs_status_alone_buys_no_budget(store: Any) -> None:
    """Before: ``status`` written at every step opened a new run with fresh budgets each time
    (13 payments under ``max_tool_calls=2``), and the thread ended with no stop reason."""
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    graph = _graph(store, [call("lookup", q=f"i{i}") for i in range(30)], policy)
    result = _edited_each_step(graph, lambda values: {"status": "ok"})
    assert len(RAN) == 2
    assert result["stop_reason"] == "max_tool_calls"


def test_an_end_written_whole_buys_no_budget(store: Any) -> None:
    """Before (documented as open): ``status`` and ``stop_reason`` written together ended the
    run, and whatever reached decide next opened one with fresh budgets. A run is its
    question's now: the end a state holds is what a client reads, and nothing written to the
    state ends a run or opens another."""
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    graph = _graph(store, [call("lookup", q=f"i{i}") for i in range(30)], policy)
    ended = {"status": "ok", "stop_reason": "success", "message": "done"}
    result = _edited_each_step(graph, lambda values: ended)
    assert len(RAN) == 2
    assert result["stop_reason"] == "max_tool_calls"


@pytest.mark.parametrize(
    "update",
    [{"status": "stopped"}, {"status": "stopped", "stop_reason": "max_steps"}, {"step": None}],
    ids=["status", "status and stop_reason", "step"],
)
def test_a_command_that_writes_and_goes_to_decide_buys_no_budget(
    store: Any, update: dict[str, Any]
) -> None:
    policy = Policy(budget=Budget(max_steps=20, max_tool_calls=2), loop_detection="off")
    graph = _graph(store, [call("lookup", q=f"i{i}") for i in range(30)], policy)
    graph.invoke({"goal": "g"}, CFG, interrupt_after=["observe"])
    for _ in range(12):
        if not graph.get_state(CFG).next:
            break
        graph.invoke(Command(update=update, goto="decide"), CFG, interrupt_after=["observe"])
    result = read(graph, "t")
    assert len(RAN) == 2
    assert (result["status"], result["stop_reason"]) == ("stopped", "max_tool_calls")


def _before(graph: GatedGraph, node: str) -> Any:
    """The config of the thread's newest checkpoint whose next node is ``node``."""
    return next(s for s in graph.get_state_history(CFG) if s.next == (node,)).config


def test_a_replay_from_before_the_gate_does_not_pay_again(store: Any) -> None:
    """Before: time travel to a checkpoint before the gate of a step that had paid ran the
    payment again, unasked (3 payments in 3 replays). The record says the payment is done:
    the replay is shown what it returned."""
    graph = _graph(store, [call("pay", item="a"), *["done"] * 4], Policy())
    graph.invoke({"goal": "pay a"}, CFG)
    for _ in range(3):
        out = graph.invoke(None, _before(graph, "gate"))
        assert out["stop_reason"] == "success"
    assert RAN == ["pay a"]
    assert [m.text for m in out["messages"] if m.type == "tool"] == ["paid a"]


def test_a_replay_under_approval_asks_nothing_again_and_never_pays_twice(store: Any) -> None:
    """The record says the replayed call ran: the gate asks no approval of it again (an
    answer there, edited, used to pay again), and the record answers it: paid once."""
    policy = Policy(require_approval=frozenset({"pay"}))
    graph = _graph(store, [call("pay", item="a"), "done", "done"], policy)
    graph.invoke({"goal": "pay a"}, CFG)
    graph.invoke(Command(resume={"approved": True}), CFG)
    out = graph.invoke(None, _before(graph, "gate"))
    assert "__interrupt__" not in out
    assert (out["stop_reason"], RAN) == ("success", ["pay a"])


def test_a_replay_from_before_execute_in_a_new_process_does_not_pay_again(store: Any) -> None:
    """Another process: its key does not verify the permit, so the gate's checks run again;
    the record says the payment is done (nobody need be asked what came of it)."""
    policy = Policy(require_approval=frozenset({"pay"}))
    graph = _graph(store, [call("pay", item="a"), "done", "done"], policy)
    graph.invoke({"goal": "pay a"}, CFG)
    graph.invoke(Command(resume={"approved": True}), CFG)
    as_another_process()
    fresh = _graph(store, ["done", "done"], policy)
    out = fresh.invoke(None, _before(graph, "execute"))
    assert "__interrupt__" not in out
    assert (out["stop_reason"], RAN) == ("success", ["pay a"])


def test_a_replay_answers_even_an_idempotent_call_from_the_record(store: Any) -> None:
    """A call that ran and returned is never run again by a replay, idempotent or not: the
    record holds what it returned, and neither the tool nor the budgets pay twice."""
    graph = _graph(store, [call("lookup", q="x"), "done", "done"], Policy())
    graph.invoke({"goal": "look x up"}, CFG)
    out = graph.invoke(None, _before(graph, "gate"))
    assert (RAN, out["stop_reason"]) == (["lookup x"], "success")
    assert read(graph, "t")["usage"]["tool_calls"] == 1
