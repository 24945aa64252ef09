"""A call runs only under its permit, whatever the state says: the three attacks of issue 21
through a real SqliteSaver (an edit of the step's calls to a denied tool, to a tool under
approval, and a fork that rewinds the step), execute on hand-built edited steps, and the honest
paths, which must not ask a human twice."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool

from gated_react import Budget, Policy, build_graph, open_checkpointer, read, resume, run
from gated_react._engine.authority.ledger import ledger_for
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.langgraph_internals import CONFIG_KEY_CHECKPOINTER
from gated_react.nodes.execute import execute
from gated_react.nodes.gate import gate
from gated_react.state import Extension
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools._meta import idempotent

from ..support.fakes import RAN
from ..support.helpers import QUESTION_ID, as_another_process, deps, state
from .hand import THREAD, applied, ending, kinds, proposal, ran, saved, step_messages, usage


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
CFG: Any = {"configurable": {"thread_id": "t"}}


def _question(graph: Any) -> str:
    messages = graph.get_state(CFG).values["messages"]
    return str(next(m.id for m in reversed(messages) if isinstance(m, HumanMessage)))


def _edit(graph: Any, tool_name: str, **args: Any) -> dict[str, Any]:
    """The step's calls replaced by ``tool_name(args)``, under a key the gate never gave."""
    edited = {"id": "edited", "tool": tool_name, "args": args, "key": "k" * 24}
    return {"step": {"run": _question(graph), "calls": [edited]}}


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


def test_an_edited_call_to_a_denied_tool_never_runs(tmp_path: Path) -> None:
    store, graph = _paused(tmp_path / "runs.sqlite", [call("refund", user_id=7), "done"])
    try:
        graph.update_state(CFG, _edit(graph, "read_secrets"), as_node="gate")
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
        graph.update_state(CFG, _edit(graph, "refund", user_id=666), as_node="gate")
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
        graph.update_state(CFG, _edit(graph, "refund", user_id=8), as_node="gate")
        assert resume(graph, "t")["status"] == "paused"
        out = resume(graph, "t", {"approved": True})
    finally:
        store.__exit__(None, None, None)
    assert RAN == ["refund 8"]
    assert out["stop_reason"] == "success"
    assert out["usage"]["tool_calls"] == 1


def test_a_fork_from_before_the_budget_was_spent_keeps_max_tool_calls(tmp_path: Path) -> None:
    """The issue's run: a fork whose counters were edited to 0 ran 4 calls under 2. The counts
    are the run's record now: a fork of any checkpoint of the run, its step cleared, goes on
    under what the run spent on every branch."""
    policy = Policy(allow=frozenset({"lookup"}), budget=Budget(max_tool_calls=2))
    script = [call("lookup", n=n) for n in range(1, 6)]
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[*script, "done"])
        graph = build_graph(model, TOOLS, policy=policy, checkpointer=saver)
        first = run(graph, "look", thread_id="t")
        assert first["stop_reason"] == "max_tool_calls"
        after_one = next(
            snap
            for snap in graph.get_state_history(CFG)
            if snap.next == ("decide",)
            and sum(isinstance(m, ToolMessage) for m in snap.values["messages"]) == 1
        )
        fork = graph.update_state(after_one.config, {"step": None}, as_node="observe")
        forked = graph.invoke(None, fork)
    assert RAN == ["lookup 1", "lookup 2"]
    assert forked["stop_reason"] == "max_tool_calls"
    assert "max_tool_calls 2 reached (3 requested)" in forked["message"]


def test_the_honest_approval_asks_once_even_resumed_by_another_process(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    store, _ = _paused(db, [call("refund", user_id=7)])
    store.__exit__(None, None, None)
    as_another_process()
    with open_checkpointer(str(db)) as saver:  # a fresh graph and store: another process
        model = ScriptedChatModel(replies=["refunded"])
        graph = build_graph(model, TOOLS, policy=POLICY, checkpointer=saver)
        out = resume(graph, "t", {"approved": True})
        asked = sum(bool(task.interrupts) for s in graph.get_state_history(CFG) for task in s.tasks)
        assert read(graph, "t")["stop_reason"] == "success"
    assert out["stop_reason"] == "success"
    assert RAN == ["refund 7"]
    assert asked == 1


# execute on hand-built steps: a step no gate handed over (its calls have no permit)


def _forged(*calls: tuple[str, dict[str, Any]], before: Any = (), first: int = 1) -> dict[str, Any]:
    """A state whose step holds ``calls`` (ids from ``c<first>``) under a made-up key, as an
    editor writes it, after the earlier steps ``before``."""
    earlier = [m for i, c in enumerate(before) for m in step_messages(*c, call=f"e{i}")]
    asked = proposal(*calls, first=first)
    held = [{**c, "key": "k" * 24} for c in asked["calls"]]
    return state(messages=[*earlier, asked["message"]], calls=held)


def test_a_denied_call_is_refused_even_when_the_step_looks_like_the_gates() -> None:
    parts = deps(tools=TOOLS, allow=frozenset({"lookup"}))
    denied = ending(execute(_forged(("read_secrets", {})), saved(), deps=parts))
    assert denied is not None
    assert denied["reason"] == "tool_denied:read_secrets"
    missing = ending(execute(_forged(("nope", {})), saved(), deps=parts))
    assert missing is not None
    assert missing["reason"] == "tool_missing:nope"
    assert RAN == []


def test_an_edited_call_is_held_to_the_budgets_the_record_keeps() -> None:
    config = saved()
    parts = deps(tools=TOOLS, max_tool_calls=2, tool_limits={"lookup": 2})
    for n in (1, 2):
        ran(_forged(("lookup", {"n": n}), first=n), config, parts)  # two calls the run spent
    over = ending(execute(_forged(("lookup", {"n": 3}), first=3), config, deps=parts))
    assert over is not None
    assert over["reason"] == "max_tool_calls"
    before = [("lookup", {"n": 1})]
    looping = ending(execute(_forged(("lookup", {"n": 1}), before=before), saved(), deps=parts))
    assert looping is not None
    assert looping["reason"] == "loop_detected"
    assert RAN == ["lookup 1", "lookup 2"]


def test_an_edited_call_under_approval_without_a_store_stops() -> None:
    parts = deps(tools=TOOLS, require_approval=frozenset({"refund"}))
    unsaved = _forged(("refund", {"user_id": 1}))
    unsaved["step"]["run"] = f"{QUESTION_ID}#n"
    stopped = ending(execute(unsaved, {}, deps=parts))
    assert stopped is not None
    assert stopped["reason"] == "approval_unavailable:refund"
    assert RAN == []


def test_an_admitted_edited_call_is_counted_and_keyed_by_the_gate() -> None:
    config, parts = saved(), deps(tools=TOOLS)
    hand_built = _forged(("lookup", {"n": 1}))
    update = execute(hand_built, config, deps=parts)
    (called,) = update["step"]["calls"]
    assert called["key"] != "k" * 24  # the key the gate gives it, not the one written
    assert kinds(config) == ["permit", "done"]
    assert usage(config).tool_calls == 1
    assert RAN == ["lookup 1"]


def test_the_async_twin_reads_the_same_record(tmp_path: Path) -> None:
    """Through AsyncSqliteSaver, which refuses sync reads on its loop: aexecute awaits it."""
    from gated_react import aopen_checkpointer, aresume

    async def attack() -> dict[str, Any]:
        async with aopen_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
            model = ScriptedChatModel(replies=[call("refund", user_id=7), "done"])
            graph = build_graph(model, TOOLS, policy=POLICY, checkpointer=saver)
            await graph.ainvoke({"goal": "refund user 7"}, CFG)
            messages = (await graph.aget_state(CFG)).values["messages"]
            edit = {"step": {"run": str(messages[0].id), "calls": [
                {"id": "edited", "tool": "read_secrets", "args": {}}
            ]}}  # fmt: skip
            await graph.aupdate_state(CFG, edit, as_node="gate")
            return dict(await aresume(graph, "t"))

    out = asyncio.run(attack())
    assert RAN == []
    assert out["stop_reason"] == "tool_denied:read_secrets"


def _extension(config: Any, signed: bool) -> None:
    """A budget extension in the run's record: as a human's answer writes it (signed), or as
    someone with the database writes one (a signature that does not verify)."""
    grant = Extension(
        budget="max_tool_calls", limit=100, was=1, spent=1, decision="approve", step=1
    )
    record = Record(THREAD, QUESTION_ID, Kind.EXTENDED, grant.budget, grant.model_dump(mode="json"))
    ledger = ledger_for(config["configurable"][CONFIG_KEY_CHECKPOINTER])
    if signed:
        ledger.append([record])
    else:
        ledger.backend.insert([replace(record.signed(ledger.key), mac="0" * 64, verified=False)])


def test_an_extension_raises_the_limits_only_of_a_policy_that_asks_and_only_signed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: an extension written into the state raised the limits; now it is a record
    that counts only when its signature verifies, and only under ``on_budget="ask"`` (where
    a spent budget asks a human: here, who says no)."""
    from gated_react._engine.authority import budgets
    from gated_react._engine.authority.approval import Decision

    asked: list[str] = []

    def no(question: dict[str, Any], *_: Any) -> Decision:
        asked.append(question["kind"])
        return Decision(approved=False)

    monkeypatch.setattr(budgets, "ask", no)

    def gated(config: Any, **fields: Any) -> dict[str, Any] | None:
        asked = proposal(("lookup", {"n": 2}), first=2)
        current = state(messages=[asked["message"]], calls=asked["calls"])
        return ending(applied(current, gate(current, config, deps=deps(tools=TOOLS, **fields))))

    for signed, asks, stops in ((True, False, True), (True, True, False), (False, True, True)):
        config = saved()
        ran(_forged(("lookup", {"n": 1}), first=1), config, deps(tools=TOOLS))
        _extension(config, signed)
        fields: dict[str, Any] = {"max_tool_calls": 1}
        if asks:
            fields["on_budget"] = "ask"
        found = gated(config, **fields)
        assert (found is not None and found["reason"] == "max_tool_calls") is stops, (signed, asks)
    assert len(asked) == 1  # the forged extension was no extension: the spent budget asked


def test_replaying_an_approved_step_from_an_older_checkpoint_runs_nothing_again(
    tmp_path: Path,
) -> None:
    """Time travel: a replay of the approved step (LangGraph writes it as a fork) finds the
    call done in the record: it is answered with what it returned then; it never runs a
    second time on the first answer, and nobody is asked again for a call that will not run."""
    store, graph = _paused(tmp_path / "runs.sqlite", [call("refund", user_id=7), "done", "again"])
    try:
        assert resume(graph, "t", {"approved": True})["stop_reason"] == "success"
        approved = next(s for s in graph.get_state_history(CFG) if s.next == ("execute",))
        replay = graph.invoke(None, approved.config)
    finally:
        store.__exit__(None, None, None)
    assert RAN == ["refund 7"]
    assert "__interrupt__" not in replay
    (answered,) = [m for m in replay["messages"] if m.type == "tool"]
    assert answered.text == "refunded"


def test_an_edit_of_another_channel_before_execute_runs_the_gates_call_once(
    tmp_path: Path,
) -> None:
    """Studio's debugging flow: paused before execute, a field edited (as the gate, the node
    that wrote last), then continued: the call runs under its permit, once, counted once."""
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[call("lookup", n=1), "done"])
        graph = build_graph(model, TOOLS, policy=POLICY, checkpointer=saver)
        graph.invoke({"goal": "look"}, CFG, interrupt_before=["execute"])
        graph.update_state(CFG, {"message": "looked at in Studio"}, as_node="gate")
        graph.invoke(None, CFG)
        out = read(graph, "t")
    assert RAN == ["lookup 1"]
    assert out["stop_reason"] == "success"
    assert out["usage"]["tool_calls"] == 1
    assert out["usage"]["per_tool"] == {"lookup": 1}


@pytest.mark.parametrize("copies", [2, 16])
def test_a_permitted_call_copied_in_the_step_runs_not_even_once_more(
    tmp_path: Path, copies: int
) -> None:
    """A tester copied the permitted call 16 times into the step (an idempotent tool, loop
    detection off, 16 calls a reply allowed): it ran 16 times under ``max_tool_calls=1``."""
    policy = POLICY.replace(
        budget=Budget(max_tool_calls=1), loop_detection="off", max_parallel_calls=16
    )
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[call("lookup", n=1), "done"])
        graph = build_graph(model, TOOLS, policy=policy, checkpointer=saver)
        graph.invoke({"goal": "look"}, CFG, interrupt_before=["execute"])
        step = dict(saver.get_tuple(CFG).checkpoint["channel_values"]["step"])  # private
        step["calls"] = step["calls"] * copies
        graph.update_state(CFG, {"step": step}, as_node="gate")
        graph.invoke(None, CFG)
        out = read(graph, "t")
    assert RAN == []
    assert out["stop_reason"] == "invalid_action:duplicate_call"
