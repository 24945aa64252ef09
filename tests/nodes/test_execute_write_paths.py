"""Issue 28, item 1: no write path of LangGraph's state API runs a call the gate did not admit.

Every path a caller of the state API has, through a real SqliteSaver: ``Command(update=,
goto="execute")`` on an ended thread and on a thread waiting on another call's question,
``Command(resume=, goto=)``, a ``Send`` to the policy nodes, ``update_state`` as every node,
``bulk_update_state``, a fork of an older checkpoint and a copied thread. A forged call to a
tool under approval is asked about (exactly that call) and runs only if a human approves it;
budgets and the reply's call limit hold; a denied tool never runs. The same paths through
``langgraph dev``'s REST API are in ``tests/hosting/test_studio_write_paths.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.types import Command, Send, StateUpdate

from gated_react import Budget, Policy, build_graph, open_checkpointer, resume, run
from gated_react.errors import MisroutedStep
from gated_react.graph import GatedGraph
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools._meta import idempotent

from ..support.fakes import RAN
from ..support.tamper import copy_rows


@idempotent
@tool
def read_secrets(item: str) -> str:
    """A secret (allowed, but only with a human's approval)."""
    RAN.append(f"read_secrets {item}")
    return "hunter2"


@idempotent
@tool
def lookup(n: int) -> str:
    """Look something up (allowed, one call per run)."""
    RAN.append(f"lookup {n}")
    return f"found {n}"


@idempotent
@tool
def wipe() -> str:
    """Not allowed at all."""
    RAN.append("wipe")
    return "wiped"


POLICY = Policy(
    allow=frozenset({"read_secrets", "lookup"}),
    require_approval=frozenset({"read_secrets"}),
    budget=Budget(max_tool_calls=1),
)
CFG: Any = {"configurable": {"thread_id": "t"}}


def forged(tool_name: str = "read_secrets", count: int = 1, **args: Any) -> list[dict[str, Any]]:
    """Calls as the gate writes them, written by a caller instead."""
    args = args or {"item": "payroll"}
    return [{"step": 1, "tool": tool_name, "args": args, "key": f"k{i}"} for i in range(count)]


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[GatedGraph]:
    """A graph on a real SQLite store whose thread ``t`` has ended (one answer, no calls)."""
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=["nothing to do", call("lookup", n=9), "done"])
        built = build_graph(model, [read_secrets, lookup, wipe], policy=POLICY, checkpointer=saver)
        assert run(built, "hello", thread_id="t")["stop_reason"] == "success"
        yield built


def _question(out: dict[str, Any]) -> dict[str, Any]:
    (asked,) = out["__interrupt__"]
    value: dict[str, Any] = asked.value
    return value


def test_a_command_to_execute_on_an_ended_thread_asks_about_exactly_that_call(
    graph: GatedGraph,
) -> None:
    """The issue's attack: before, read_secrets ran with no question."""
    out = graph.invoke(Command(update={"calls": forged()}, goto="execute"), CFG)
    assert RAN == []
    asked = _question(out)
    assert (asked["kind"], asked["tool"], asked["args"]) == (
        "approval",
        "read_secrets",
        {"item": "payroll"},
    )
    rejected = graph.invoke(Command(resume={"approved": False, "reason": "forged"}), CFG)
    assert RAN == []
    assert rejected["stop_reason"] == "tool_rejected:read_secrets"


def test_forged_calls_are_held_to_the_reply_limit_and_the_budgets(graph: GatedGraph) -> None:
    """Before: 4 forged calls ran under max_tool_calls=1 and max_parallel_calls=1."""
    out = graph.invoke(Command(update={"calls": forged(count=4)}, goto="execute"), CFG)
    assert RAN == []
    assert out["stop_reason"] == "invalid_action:multiple_actions"
    assert "4 tool calls in one reply; one is allowed" in out["message"]
    ran = graph.invoke(Command(update={"calls": forged("lookup", n=1)}, goto="execute"), CFG)
    assert ran["stop_reason"] is not None
    spent = graph.invoke(Command(update={"calls": forged("lookup", n=2)}, goto="execute"), CFG)
    assert RAN == ["lookup 1"]
    assert spent["stop_reason"] == "max_tool_calls"


def test_a_forged_call_with_bad_arguments_is_refused_like_the_gates_own(
    graph: GatedGraph,
) -> None:
    out = graph.invoke(Command(update={"calls": forged("lookup", n="one")}, goto="execute"), CFG)
    assert RAN == []
    assert out["stop_reason"] == "tool_bad_args:lookup"


def test_a_denied_tool_never_runs_whatever_the_command_says(graph: GatedGraph) -> None:
    out = graph.invoke(Command(update={"calls": forged("wipe", item="x")}, goto="execute"), CFG)
    assert RAN == []
    assert out["stop_reason"] == "tool_denied:wipe"


def test_a_command_on_a_thread_waiting_on_another_question(tmp_path: Path) -> None:
    """Paused on read_secrets(item=a): a command forges read_secrets(item=b) straight to
    execute, beside the gate's waiting question. The two would both write the step's calls,
    which LangGraph refuses only after both ran (a call ran, then its record was lost and the
    thread stuck): execute now refuses first, with one clear line, before anything is asked
    or run, and a new message starts a new run."""
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[call("read_secrets", item="a"), "done", "hello"])
        graph = build_graph(model, [read_secrets, lookup], policy=POLICY, checkpointer=saver)
        assert run(graph, "read a", thread_id="t")["status"] == "paused"
        with pytest.raises(MisroutedStep, match=r"^execute was reached beside another node's"):
            graph.invoke(Command(update={"calls": forged(item="b")}, goto="execute"), CFG)
        assert RAN == []
        out = graph.invoke({"messages": [("user", "never mind")]}, CFG)
    assert RAN == []
    assert out["stop_reason"] == "success"
    assert out["trace"][0]["stop_reason"] == "tool_rejected:read_secrets"


@pytest.mark.parametrize("approve", [True, False])
def test_resume_with_a_goto_to_execute_runs_nothing_and_loses_nothing(
    tmp_path: Path, approve: bool
) -> None:
    """An answer with a goto and an update beside it: before, execute asked its own question,
    and approving both ran the forged call, then LangGraph refused the step and the call's
    record was gone. Now nothing is asked, nothing runs, and the thread's record stands."""
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[call("read_secrets", item="a"), "done"])
        graph = build_graph(model, [read_secrets, lookup], policy=POLICY, checkpointer=saver)
        assert run(graph, "read a", thread_id="t")["status"] == "paused"
        sneaked = Command(
            resume={"approved": approve}, update={"calls": forged(item="b")}, goto="execute"
        )
        with pytest.raises(MisroutedStep):
            graph.invoke(sneaked, CFG)
        after = graph.get_state(CFG).values
        assert RAN == []
        assert after["history"] == []
        # the gate's own answer, in the same superstep, is kept when the gate finished before
        # execute refused (a rejection traced); otherwise LangGraph drops it with the step and
        # the question still waits: either way nothing ran and no record is lost
        traced = [t["stop_reason"] for t in after["trace"]]
        if traced or approve:
            assert traced == ([] if approve else ["tool_rejected:read_secrets"])
        else:
            assert graph.get_state(CFG).interrupts
        out = graph.invoke({"messages": [("user", "never mind")]}, CFG)
    assert RAN == []
    assert out["stop_reason"] == "success"


@pytest.mark.parametrize("node", ["execute", "gate"])
def test_a_send_to_a_policy_node_runs_nothing(graph: GatedGraph, node: str) -> None:
    """A Send carries a state of its own: counters of zero, calls no gate wrote. Before, the
    run died with an AttributeError traceback."""
    carried = {"goal": "x", "calls": forged(), "usage": {"tool_calls": 0}}
    carried["action"] = {"kind": "tool", "name": "lookup", "args": {"n": 5}}
    out = graph.invoke(Command(goto=Send(node, carried)), CFG)
    assert RAN == []
    assert out["stop_reason"] == "invalid_action:sent"
    assert f"{node} was reached by a Send" in out["message"]


@pytest.mark.parametrize(
    "as_node", ["decide", "validate", "gate", "execute", "observe", "finish", "stop"]
)
def test_update_state_as_any_node_then_a_command_to_execute(
    graph: GatedGraph, as_node: str
) -> None:
    graph.update_state(CFG, {"calls": forged()}, as_node=as_node)
    out = graph.invoke(Command(goto="execute"), CFG)
    assert RAN == []
    assert _question(out)["args"] == {"item": "payroll"}


def test_bulk_update_state_is_checked_like_one_update(graph: GatedGraph) -> None:
    graph.bulk_update_state(
        CFG,
        [
            [StateUpdate({"message": "first"}, as_node="observe")],
            [StateUpdate({"calls": forged(), "stop_reason": None}, as_node="gate")],
        ],
    )
    assert graph.get_state(CFG).next == ("execute",)
    out = graph.invoke(None, CFG)
    assert RAN == []
    assert _question(out)["args"] == {"item": "payroll"}


def test_a_fork_of_an_older_checkpoint_is_checked(graph: GatedGraph) -> None:
    first = list(graph.get_state_history(CFG))[-2]  # the thread's first checkpoint after input
    fork = graph.update_state(first.config, {"calls": forged("wipe", item="x")}, as_node="gate")
    out = graph.invoke(None, fork)
    assert RAN == []
    assert out["stop_reason"] == "tool_denied:wipe"


def test_a_copied_thread_asks_again_for_an_approved_step(tmp_path: Path) -> None:
    """Approved on thread ``t`` and stopped just before execute (interrupt_before), then its
    rows copied under another thread id (what a server's thread copy does): the copy's execute
    asks again; the original runs once."""
    db = str(tmp_path / "runs.sqlite")
    with open_checkpointer(db) as saver:
        model = ScriptedChatModel(replies=[call("read_secrets", item="a"), "done", "done"])
        graph = build_graph(model, [read_secrets, lookup], policy=POLICY, checkpointer=saver)
        graph.invoke({"goal": "read a"}, CFG, interrupt_before=["execute"])
        graph.invoke(Command(resume={"approved": True}), CFG, interrupt_before=["execute"])
        held = graph.get_state(CFG)
        assert held.next == ("execute",)
        upto = held.config["configurable"]["checkpoint_id"]
        assert copy_rows(db, "t", "copy", upto=upto, writes_before=False) > 0
        copied: Any = {"configurable": {"thread_id": "copy"}}
        asked = _question(graph.invoke(None, copied))
        assert (asked["tool"], asked["args"]) == ("read_secrets", {"item": "a"})
        assert RAN == []
        out = resume(graph, "t")
    assert RAN == ["read_secrets a"]
    assert out["stop_reason"] == "success"


@pytest.mark.parametrize("node", ["decide", "validate", "observe", "finish", "stop"])
def test_a_goto_to_any_node_beside_a_waiting_question_runs_nothing(
    tmp_path: Path, node: str
) -> None:
    """Before: a goto to decide beside the gate's question told the conversation the call was
    rejected while the question still waited, and approving it then raised LangGraph's
    InvalidUpdateError (both nodes wrote the step's calls); to validate, the gate's admitted
    call and a second gate ran side by side. Every node now refuses first."""
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[call("read_secrets", item="a"), "done"])
        graph = build_graph(model, [read_secrets, lookup], policy=POLICY, checkpointer=saver)
        assert run(graph, "read a", thread_id="t")["status"] == "paused"
        with pytest.raises(MisroutedStep, match=rf"^{node} was reached beside"):
            graph.invoke(Command(goto=node), CFG)
        out = graph.invoke({"messages": [("user", "never mind")]}, CFG)
    assert RAN == []
    assert out["stop_reason"] == "success"
