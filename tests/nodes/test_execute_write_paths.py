"""Issue 28, item 1, against the permit (issue 43): no write path of LangGraph's state API runs a
call the gate did not let through.

Every path a caller of the state API has, through a real SqliteSaver: ``Command(update=,
goto="execute")`` on an ended thread and on a thread waiting on another call's question,
``Command(resume=, goto=)``, a ``Send`` to the policy nodes, ``update_state`` as every node,
``bulk_update_state``, a fork of an older checkpoint and a copied thread. A step written by any
of them names calls no permit in the run's record names: each goes through the gate's checks
again in ``execute``. A forged call to a tool under approval is asked about (exactly that call)
and runs only if a human approves it; budgets hold; a denied tool never runs. The same paths
through ``langgraph dev``'s REST API are in ``tests/hosting/test_studio_write_paths.py``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NotRequired

import pytest
from langchain.agents import AgentState
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.types import Command, Send, StateUpdate

from gated_react import Budget, Policy, build_graph, open_checkpointer, read, resume, run
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


def question_id(graph: GatedGraph, config: Any = CFG) -> str:
    """The id of the thread's last question (the run a forged step must name to be taken)."""
    messages = graph.get_state(config).values["messages"]
    return str(next(m.id for m in reversed(messages) if isinstance(m, HumanMessage)))


def forged(
    graph: GatedGraph, tool_name: str = "read_secrets", count: int = 1, **args: Any
) -> dict[str, Any]:
    """A step of the thread's run as the gate would hand it to execute, written by a caller."""
    args = args or {"item": "payroll"}
    calls = [{"id": f"forged-{uuid.uuid4().hex[:8]}", "tool": tool_name, "args": args}
             for _ in range(count)]  # fmt: skip
    return {"run": question_id(graph), "calls": calls}


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[GatedGraph]:
    """A graph on a real SQLite store whose thread ``t`` has ended (one answer, no calls)."""
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=["nothing to do", call("lookup", n=9), "done"])
        built = build_graph(model, [read_secrets, lookup, wipe], policy=POLICY, checkpointer=saver)
        assert run(built, "hello", thread_id="t")["stop_reason"] == "success"
        yield built


def _questions(out: dict[str, Any]) -> list[str]:
    """What each open question asks about: ``kind tool(args)``."""
    asked = (i.value for i in out["__interrupt__"])
    return [f"{q['kind']} {q['tool']}({json.dumps(q['args'], sort_keys=True)})" for q in asked]


PAYROLL = 'approval read_secrets({"item": "payroll"})'
ITEM_A = 'approval read_secrets({"item": "a"})'
ITEM_B = 'approval read_secrets({"item": "b"})'


def test_a_command_to_execute_on_an_ended_thread_asks_about_exactly_that_call(
    graph: GatedGraph,
) -> None:
    """The issue's attack: before, read_secrets ran with no question."""
    out = graph.invoke(Command(update={"step": forged(graph)}, goto="execute"), CFG)
    assert RAN == []
    assert _questions(out) == [PAYROLL]
    rejected = graph.invoke(Command(resume={"approved": False, "reason": "forged"}), CFG)
    assert RAN == []
    assert rejected["stop_reason"] == "tool_rejected:read_secrets"
    assert "the gate did not let it through" in rejected["message"]


def test_an_approved_forged_call_runs_once_under_the_permit_the_answer_wrote(
    graph: GatedGraph,
) -> None:
    graph.invoke(Command(update={"step": forged(graph)}, goto="execute"), CFG)
    graph.invoke(Command(resume={"approved": True}), CFG)
    assert RAN == ["read_secrets payroll"]
    (permit,) = [t for t in read(graph, "t")["trace"] if t["tool"] == "read_secrets"]
    assert permit["ok"] is True


def test_forged_calls_are_held_to_the_budgets(graph: GatedGraph) -> None:
    """Before: 4 forged calls ran under max_tool_calls=1."""
    ran = graph.invoke(Command(update={"step": forged(graph, "lookup", n=1)}, goto="execute"), CFG)
    assert ran["stop_reason"] == "max_tool_calls"  # the model's next call, after the forged one
    spent = graph.invoke(
        Command(update={"step": forged(graph, "lookup", n=2)}, goto="execute"), CFG
    )
    assert RAN == ["lookup 1"]
    assert spent["stop_reason"] == "max_tool_calls"
    assert read(graph, "t")["usage"]["tool_calls"] == 1


def test_a_forged_call_reusing_a_counted_call_id_is_held_to_the_budgets(
    graph: GatedGraph,
) -> None:
    for n in range(5):
        step = {
            "run": question_id(graph),
            "calls": [{"id": "c", "tool": "lookup", "args": {"n": n}}],
        }
        graph.invoke(Command(update={"step": step}, goto="execute"), CFG)
    assert RAN == ["lookup 0"], f"{len(RAN)} calls ran under max_tool_calls=1"


def test_forged_calls_are_held_to_the_reply_limit(tmp_path: Path) -> None:
    """Before: ``invalid_action:multiple_actions``, nothing ran."""
    policy = Policy(allow=frozenset({"lookup"}), budget=Budget(max_tool_calls=10))
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=["nothing to do", "done"])
        graph = build_graph(model, [lookup], policy=policy, checkpointer=saver)
        run(graph, "hello", thread_id="t")
        step = {"run": question_id(graph), "calls": [
            {"id": f"f{n}", "tool": "lookup", "args": {"n": n}} for n in range(4)
        ]}  # fmt: skip
        out = graph.invoke(Command(update={"step": step}, goto="execute"), CFG)
    assert len(RAN) <= 1, f"{len(RAN)} forged calls ran in one step under max_parallel_calls=1"
    assert out["stop_reason"] == "invalid_action:multiple_actions"


def test_a_forged_call_with_bad_arguments_is_refused_like_the_gates_own(
    graph: GatedGraph,
) -> None:
    step = forged(graph, "lookup", n="one")
    out = graph.invoke(Command(update={"step": step}, goto="execute"), CFG)
    assert RAN == []
    assert out["stop_reason"] == "tool_bad_args:lookup"


def test_a_denied_tool_never_runs_whatever_the_command_says(graph: GatedGraph) -> None:
    step = forged(graph, "wipe", item="x")
    out = graph.invoke(Command(update={"step": step}, goto="execute"), CFG)
    assert RAN == []
    assert out["stop_reason"] == "tool_denied:wipe"


def test_a_step_of_another_run_is_refused_in_one_line(graph: GatedGraph) -> None:
    """A step naming a run the conversation is not on (its own, with budgets of its own) is
    no step of this thread's: nothing runs, and a new message goes on."""
    step = {**forged(graph, "lookup", n=1), "run": "another"}
    with pytest.raises(MisroutedStep, match=r"^execute was reached with a step of another run"):
        graph.invoke(Command(update={"step": step}, goto="execute"), CFG)
    assert RAN == []


def _paused(tmp_path: Path, replies: list[Any]) -> tuple[Any, GatedGraph]:
    """A graph on a real SQLite store whose thread ``t`` waits on the gate's question about
    ``read_secrets(item="a")`` (the caller closes the store)."""
    store = open_checkpointer(str(tmp_path / "runs.sqlite"))
    model = ScriptedChatModel(replies=replies)
    graph = build_graph(
        model, [read_secrets, lookup], policy=POLICY, checkpointer=store.__enter__()
    )
    assert run(graph, "read a", thread_id="t")["status"] == "paused"
    return store, graph


def test_a_command_on_a_thread_waiting_on_another_question_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    """Paused on read_secrets(item=a): a command forges read_secrets(item=b) straight to
    execute, beside the gate's waiting question. execute refuses it (``MisroutedStep``):
    nothing is asked, nothing runs, the thread still waits on the question a human was shown,
    and a new message starts a new run."""
    store, graph = _paused(tmp_path, [call("read_secrets", item="a"), "done", "hello"])
    try:
        with pytest.raises(MisroutedStep, match="waiting question"):
            graph.invoke(Command(update={"step": forged(graph, item="b")}, goto="execute"), CFG)
        assert RAN == []
        waiting = read(graph, "t")
        assert waiting["status"] == "paused"
        assert [q["args"] for q in waiting["pending"]] == [{"item": "a"}]
        ended = graph.invoke({"messages": [("user", "never mind")]}, CFG)
    finally:
        store.__exit__(None, None, None)
    assert RAN == []
    assert ended["stop_reason"] == "success"


def test_an_answer_given_for_the_question_shown_does_not_run_a_call_forged_beside_it(
    tmp_path: Path,
) -> None:
    """The human approves the question they were shown (item=a) after a command forged
    item=b beside it. The forged step stays among the checkpoint's pending writes (LangGraph
    applies a command's update again with every resume), so the gate would now ask about b
    under the id the human saw a under: it refuses instead (``MisroutedStep``). Nothing runs
    on that approval, neither b nor a; a new message goes on."""
    store, graph = _paused(tmp_path, [call("read_secrets", item="a"), "done", "hello"])
    try:
        shown = read(graph, "t")["pending"][0]
        assert shown["args"] == {"item": "a"}  # what the human approves
        with pytest.raises(MisroutedStep):
            graph.invoke(Command(update={"step": forged(graph, item="b")}, goto="execute"), CFG)
        with pytest.raises(MisroutedStep):
            graph.invoke(Command(resume={shown["id"]: {"approved": True}}), CFG)
        assert RAN == []
        ended = graph.invoke({"messages": [("user", "never mind")]}, CFG)
    finally:
        store.__exit__(None, None, None)
    assert RAN == [], "a call no human was shown ran on an approval of another"
    assert ended["stop_reason"] == "success"


@pytest.mark.parametrize("approve", [True, False])
def test_resume_with_a_goto_to_execute_runs_nothing_and_loses_nothing(
    tmp_path: Path, approve: bool
) -> None:
    """An answer with a goto and an update beside it is refused (``MisroutedStep``): the
    answer goes to no question, nothing runs, the thread still waits, and a new message goes
    on."""
    store, graph = _paused(tmp_path, [call("read_secrets", item="a"), "done"])
    try:
        sneaked = Command(
            resume={"approved": approve}, update={"step": forged(graph, item="b")}, goto="execute"
        )
        with pytest.raises(MisroutedStep):
            graph.invoke(sneaked, CFG)
        assert RAN == []
        after = read(graph, "t")
        assert (after["status"], after["history"], after["trace"]) == ("paused", [], [])
        ended = graph.invoke({"messages": [("user", "never mind")]}, CFG)
    finally:
        store.__exit__(None, None, None)
    assert RAN == []
    assert ended["stop_reason"] == "success"


@pytest.mark.parametrize("node", ["execute", "gate"])
def test_a_send_to_a_policy_node_runs_only_what_the_gate_lets_through(
    graph: GatedGraph, node: str
) -> None:
    """A Send carries a state of its own: calls no gate wrote. Its calls are checked as any
    edit's: the one under approval is asked about, the denied one refused; one carrying no
    question of the thread's is refused in one line. Before, the run died with an
    AttributeError traceback."""
    messages = graph.get_state(CFG).values["messages"]
    asked = graph.invoke(
        Command(goto=Send(node, {"messages": messages, "step": forged(graph)})), CFG
    )
    assert RAN == []
    assert _questions(asked) == [PAYROLL]
    graph.invoke(Command(resume={"approved": False}), CFG)
    denied = {"messages": messages, "step": forged(graph, "wipe", item="x")}
    assert graph.invoke(Command(goto=Send(node, denied)), CFG)["stop_reason"] == "tool_denied:wipe"
    with pytest.raises(MisroutedStep, match=rf"^{node} was reached with a step of another run"):
        graph.invoke(Command(goto=Send(node, {"step": forged(graph)})), CFG)
    assert RAN == []


@pytest.mark.parametrize(
    "as_node", ["decide", "validate", "gate", "execute", "observe", "finish", "stop"]
)
def test_update_state_as_any_node_then_a_command_to_execute(
    graph: GatedGraph, as_node: str
) -> None:
    """Whatever else runs beside it, nothing runs unasked: every question names exactly the
    forged call (as ``execute``, the edit sends the graph to ``observe`` beside it, which
    refuses the calls that never ran in one line)."""
    graph.update_state(CFG, {"step": forged(graph)}, as_node=as_node)
    if as_node == "execute":
        with pytest.raises(MisroutedStep, match=r"^observe was reached with calls that never ran"):
            graph.invoke(Command(goto="execute"), CFG)
        assert RAN == []
        return
    out = graph.invoke(Command(goto="execute"), CFG)
    assert RAN == []
    assert set(_questions(out)) == {PAYROLL}


def test_bulk_update_state_is_checked_like_one_update(graph: GatedGraph) -> None:
    graph.bulk_update_state(
        CFG,
        [
            [StateUpdate({"message": "first"}, as_node="observe")],
            [StateUpdate({"step": forged(graph)}, as_node="gate")],
        ],
    )
    assert graph.get_state(CFG).next == ("execute",)
    out = graph.invoke(None, CFG)
    assert RAN == []
    assert _questions(out) == [PAYROLL]


def test_a_fork_of_an_older_checkpoint_is_checked(graph: GatedGraph) -> None:
    first = next(s for s in graph.get_state_history(CFG) if s.next == ("validate",))
    denied = graph.update_state(
        first.config, {"step": forged(graph, "wipe", item="x")}, as_node="gate"
    )
    assert graph.invoke(None, denied)["stop_reason"] == "tool_denied:wipe"
    asking = graph.update_state(first.config, {"step": forged(graph)}, as_node="gate")
    assert _questions(graph.invoke(None, asking)) == [PAYROLL]
    assert RAN == []


def test_a_copied_thread_asks_again_for_an_approved_step(tmp_path: Path) -> None:
    """Approved on thread ``t`` and stopped just before execute (interrupt_before), then its
    rows copied under another thread id (what a server's thread copy does): the copy's run
    has no permit in its record, so its execute asks again; the original runs once."""
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
        assert _questions(graph.invoke(None, copied)) == [ITEM_A]
        assert RAN == []
        out = resume(graph, "t")
    assert RAN == ["read_secrets a"]
    assert out["stop_reason"] == "success"


@pytest.mark.parametrize("node", ["decide", "validate", "gate", "observe", "finish", "stop"])
def test_a_goto_to_any_node_beside_a_waiting_question_runs_nothing(
    tmp_path: Path, node: str
) -> None:
    """Before: a goto to decide beside the gate's question told the conversation the call was
    rejected while the question still waited. Now no tool runs, the question that waits is
    still exactly the one asked (or the node refuses in one line), and a new message goes on."""
    replies = [call("read_secrets", item="a"), "done", "done", "done"]
    store, graph = _paused(tmp_path, replies)
    try:
        if node in ("observe", "finish", "stop"):  # nothing for them to do: one line
            with pytest.raises(MisroutedStep, match=rf"^{node} was reached "):
                graph.invoke(Command(goto=node), CFG)
        else:  # decide asks the model again beside it, validate reads its reply again
            out = graph.invoke(Command(goto=node), CFG)
            assert set(_questions(out)) == {ITEM_A}
        assert [q["args"] for q in read(graph, "t")["pending"]] == [{"item": "a"}]
        ended = graph.invoke({"messages": [("user", "never mind")]}, CFG)
    finally:
        store.__exit__(None, None, None)
    assert RAN == []
    assert ended["stop_reason"] == "success"


class _Reviewed(AgentState[Any]):
    needs_review: NotRequired[bool]


def test_a_forged_calls_question_is_asked_until_answered_whatever_when_says_then(
    tmp_path: Path,
) -> None:
    """execute checks a forged call as the gate does, and records that it asked: a reject
    sent with a field that makes the review's ``when`` say no human is needed runs nothing."""
    review = HumanInTheLoopMiddleware(interrupt_on={"read_secrets": {
        "allowed_decisions": ["approve", "reject"],
        "when": lambda request: request.state.get("needs_review", True),
    }})  # fmt: skip
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=["nothing to do", "done"])
        built = build_graph(model, [read_secrets, lookup], policy=POLICY, middleware=[review],
                            state_schema=_Reviewed, checkpointer=saver)  # fmt: skip
        assert run(built, "hello", thread_id="t")["stop_reason"] == "success"
        out = built.invoke(Command(update={"step": forged(built)}, goto="execute"), CFG)
        assert _questions(out) == [PAYROLL]
        built.invoke(
            Command(resume={"type": "reject", "message": "no"}, update={"needs_review": False}),
            CFG,
        )
    assert RAN == []
