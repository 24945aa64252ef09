"""A call runs only if the policy admits it, whatever the state says: the three attacks of
issue 21 through a real SqliteSaver (an edit of ``calls`` to a denied tool, to a tool under
approval, and a fork whose counters were edited down), execute on hand-built edited state, and
the honest paths, which must not ask a human twice."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from gated_react import Budget, Policy, build_graph, open_checkpointer, read, resume, run
from gated_react._engine.call_keys import loop_key
from gated_react.nodes.execute import prepare
from gated_react.nodes.gate import gate
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools._meta import idempotent

from ..support.fakes import RAN
from ..support.helpers import deps, state


@idempotent
@tool
def read_secrets() -> str:
    """Every secret there is (the policy does not allow it)."""
    RAN.append("read_secrets")
    return "hunter2"


@idempotent
@tool
def refund(user_id: int) -> str:
    """Refund a user (needs a human's approval)."""
    RAN.append(f"refund {user_id}")
    return "refunded"


@idempotent
@tool
def lookup(n: int) -> str:
    """Look something up."""
    RAN.append(f"lookup {n}")
    return f"found {n}"


TOOLS = [read_secrets, refund, lookup]
POLICY = Policy(allow=frozenset({"refund", "lookup"}), require_approval=frozenset({"refund"}))


def _edit(tool_name: str, **args: Any) -> dict[str, Any]:
    return {"calls": [{"step": 1, "tool": tool_name, "args": args, "key": "k", "outcome": None}]}


def _paused(db: Path, replies: list[Any], policy: Policy = POLICY) -> Any:
    """A thread paused on the gate's approval question for ``refund``; the graph on a real
    SQLite store (the caller closes it)."""
    store = open_checkpointer(str(db))
    saver = store.__enter__()
    graph = build_graph(
        ScriptedChatModel(replies=replies), TOOLS, policy=policy, checkpointer=saver
    )
    out = run(graph, "refund user 7", thread_id="t")
    assert out["status"] == "paused"
    return store, graph


CFG: Any = {"configurable": {"thread_id": "t"}}


def test_an_edited_call_to_a_denied_tool_never_runs(tmp_path: Path) -> None:
    store, graph = _paused(tmp_path / "runs.sqlite", [call("refund", user_id=7), "done"])
    try:
        graph.update_state(CFG, _edit("read_secrets"), as_node="gate")
        out = resume(graph, "t")
    finally:
        store.__exit__(None, None, None)
    assert RAN == []
    assert out["stop_reason"] == "tool_denied:read_secrets"
    assert "the gate did not let it through" in out["message"]
    assert out["trace"][-1]["stop_reason"] == "tool_denied:read_secrets"
    assert out["trace"][-1]["tool"] == "read_secrets"


def test_an_edited_call_to_a_tool_under_approval_waits_for_a_human(tmp_path: Path) -> None:
    replies = [call("lookup", n=1), call("lookup", n=2), "done"]
    store, graph = _paused(tmp_path / "runs.sqlite", [call("refund", user_id=7), *replies])
    try:
        graph.update_state(CFG, _edit("refund", user_id=666), as_node="gate")
        asked = resume(graph, "t")
        assert RAN == []
        assert asked["status"] == "paused"
        (question,) = asked["pending"]
        assert (question["kind"], question["tool"], question["args"]) == (
            "approval",
            "refund",
            {"user_id": 666},
        )
        rejected = resume(graph, "t", {"approved": False, "reason": "not mine"})
    finally:
        store.__exit__(None, None, None)
    assert RAN == []
    assert rejected["stop_reason"] == "tool_rejected:refund"


def test_an_approved_edited_call_runs_once_and_is_counted(tmp_path: Path) -> None:
    store, graph = _paused(tmp_path / "runs.sqlite", [call("refund", user_id=7), "done"])
    try:
        graph.update_state(CFG, _edit("refund", user_id=8), as_node="gate")
        assert resume(graph, "t")["status"] == "paused"
        out = resume(graph, "t", {"approved": True})
    finally:
        store.__exit__(None, None, None)
    assert RAN == ["refund 8"]
    assert out["stop_reason"] == "success"
    assert out["usage"]["tool_calls"] == 1


def test_a_fork_with_its_counters_edited_down_keeps_max_tool_calls(tmp_path: Path) -> None:
    """The issue's run: usage.tool_calls = 0 on a forked checkpoint ran 4 calls under 2."""
    policy = Policy(allow=frozenset({"lookup"}), budget=Budget(max_tool_calls=2))
    script = [call("lookup", n=n) for n in range(1, 6)]
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[*script, "done"])
        graph = build_graph(model, TOOLS, policy=policy, checkpointer=saver)
        first = run(graph, "look", thread_id="t")
        assert first["stop_reason"] == "max_tool_calls"
        after_two = next(
            snap
            for snap in graph.get_state_history(CFG)
            if snap.next == ("decide",) and snap.values["usage"]["tool_calls"] == 2
        )
        usage = {**after_two.values["usage"], "tool_calls": 0, "per_tool": {}}
        fork = graph.update_state(after_two.config, {"usage": usage}, as_node="observe")
        forked = graph.invoke(None, fork)
    assert RAN == ["lookup 1", "lookup 2"]
    assert forked["stop_reason"] == "max_tool_calls"
    assert "max_tool_calls 2 reached (3 requested)" in forked["message"]


def test_the_honest_approval_asks_once_even_resumed_by_another_process(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    store, _ = _paused(db, [call("refund", user_id=7)])
    store.__exit__(None, None, None)
    with open_checkpointer(str(db)) as saver:  # a fresh graph and store: another process
        model = ScriptedChatModel(replies=["refunded"])
        graph = build_graph(model, TOOLS, policy=POLICY, checkpointer=saver)
        out = resume(graph, "t", {"approved": True})
        asked = sum(bool(task.interrupts) for s in graph.get_state_history(CFG) for task in s.tasks)
        assert read(graph, "t")["stop_reason"] == "success"
    assert out["stop_reason"] == "success"
    assert RAN == ["refund 7"]
    assert asked == 1


# execute on hand-built state: ``edited`` is what came_from_an_edit says of the checkpoint


def _pending(tool_name: str, **args: Any) -> dict[str, Any]:
    return {"step": 1, "tool": tool_name, "args": args, "key": "k" * 24}


def test_a_denied_call_is_refused_even_when_the_state_looks_like_the_gates() -> None:
    parts = deps(tools=TOOLS, allow=frozenset({"lookup"}))
    early = prepare(state(calls=[_pending("read_secrets")]), {}, parts)[2]
    assert early is not None
    assert early["stop_reason"] == "tool_denied:read_secrets"
    assert early["calls"][0]["outcome"]["error"] == "tool_denied:read_secrets"
    missing = prepare(state(calls=[_pending("nope")]), {}, parts)[2]
    assert missing is not None
    assert missing["stop_reason"] == "tool_missing:nope"


def test_an_edited_call_is_held_to_the_budgets_the_record_keeps() -> None:
    parts = deps(tools=TOOLS, max_tool_calls=2, tool_limits={"lookup": 2})
    record = [loop_key("lookup", {"n": 1}), loop_key("lookup", {"n": 2})]
    edited = state(calls=[_pending("lookup", n=3)], seen=record, usage={"steps": 3})
    early = prepare(edited, {}, parts, edited=True)[2]
    assert early is not None
    assert early["stop_reason"] == "max_tool_calls"
    looping = state(calls=[_pending("lookup", n=1)], seen=record, usage={"steps": 3})
    again = prepare(looping, {}, deps(tools=TOOLS), edited=True)[2]
    assert again is not None
    assert again["stop_reason"] == "loop_detected"


def test_an_edited_call_under_approval_without_a_store_stops() -> None:
    parts = deps(tools=TOOLS, require_approval=frozenset({"refund"}))
    early = prepare(state(calls=[_pending("refund", user_id=1)]), {}, parts, edited=True)[2]
    assert early is not None
    assert early["stop_reason"] == "approval_unavailable:refund"


def test_an_admitted_edited_call_is_counted_and_keyed_by_the_gate() -> None:
    parts = deps(tools=TOOLS)
    hand_built = state(calls=[_pending("lookup", n=1)], usage={"steps": 1})
    after, calls, early, counted = prepare(hand_built, {}, parts, edited=True)
    assert early is None
    assert calls[0].key != "k" * 24
    assert counted["usage"]["tool_calls"] == after.usage.tool_calls == 1
    assert counted["seen"] == [loop_key("lookup", {"n": 1})]


def test_the_gate_counts_from_the_record_when_usage_was_edited_down() -> None:
    record = [loop_key("lookup", {"n": 1}), loop_key("lookup", {"n": 2})]
    edited = state(
        action={"kind": "tool", "name": "lookup", "args": {"n": 3}},
        seen=record,
        usage={"steps": 3, "tool_calls": 0},
    )
    update = gate(edited, {}, deps=deps(tools=TOOLS, max_tool_calls=2))
    assert update["stop_reason"] == "max_tool_calls"


def test_the_async_twin_reads_the_same_record(tmp_path: Path) -> None:
    """Through AsyncSqliteSaver, which refuses sync reads on its loop: aexecute awaits it."""
    from gated_react import aopen_checkpointer, aresume

    async def attack() -> dict[str, Any]:
        async with aopen_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
            model = ScriptedChatModel(replies=[call("refund", user_id=7), "done"])
            graph = build_graph(model, TOOLS, policy=POLICY, checkpointer=saver)
            await graph.ainvoke({"goal": "refund user 7"}, CFG)
            await graph.aupdate_state(CFG, _edit("read_secrets"), as_node="gate")
            return await aresume(graph, "t")

    out = asyncio.run(attack())
    assert RAN == []
    assert out["stop_reason"] == "tool_denied:read_secrets"


def test_an_edited_extension_does_not_raise_the_limits_of_a_policy_that_never_asks() -> None:
    grant = {
        "budget": "max_tool_calls",
        "limit": 100,
        "was": 1,
        "spent": 1,
        "decision": "approve",
        "step": 1,
    }
    edited = state(
        action={"kind": "tool", "name": "lookup", "args": {"n": 2}},
        seen=[loop_key("lookup", {"n": 1})],
        usage={"steps": 2, "tool_calls": 1},
        extensions=[grant],
    )
    update = gate(edited, {}, deps=deps(tools=TOOLS, max_tool_calls=1))
    assert update["stop_reason"] == "max_tool_calls"
    asking = gate(edited, {}, deps=deps(tools=TOOLS, max_tool_calls=1, on_budget="ask"))
    assert "stop_reason" not in asking  # a human granted it, under a policy that asks


def test_replaying_an_approved_step_from_an_older_checkpoint_asks_again(tmp_path: Path) -> None:
    """Time travel: LangGraph writes a replay as a fork, so the approved call of the replayed
    step is a question again, not a second run on the first answer (and not its own repeat)."""
    store, graph = _paused(tmp_path / "runs.sqlite", [call("refund", user_id=7), "done", "again"])
    try:
        assert resume(graph, "t", {"approved": True})["stop_reason"] == "success"
        approved = next(s for s in graph.get_state_history(CFG) if s.next == ("execute",))
        replay = graph.invoke(None, approved.config)
    finally:
        store.__exit__(None, None, None)
    assert RAN == ["refund 7"]
    (question,) = replay["__interrupt__"]
    assert (question.value["kind"], question.value["args"]) == ("approval", {"user_id": 7})


def test_an_edit_of_another_channel_before_execute_runs_the_gates_call_once(
    tmp_path: Path,
) -> None:
    """Studio's debugging flow: paused before execute, a field edited (as the gate, the node
    that wrote last), then continued: the calls the gate let through are checked again, not
    taken for their own repeats, and counted once."""
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[call("lookup", n=1), "done"])
        graph = build_graph(model, TOOLS, policy=POLICY, checkpointer=saver)
        graph.invoke({"goal": "look"}, CFG, interrupt_before=["execute"])
        graph.update_state(CFG, {"message": "looked at in Studio"}, as_node="gate")
        out = graph.invoke(None, CFG)
    assert RAN == ["lookup 1"]
    assert out["stop_reason"] == "success"
    assert out["usage"]["tool_calls"] == 1
    assert out["usage"]["per_tool"] == {"lookup": 1}
