"""What an outside tester tried against the branch check (December 2026; each test failed on
its first version, in-process graphs on a real SQLite saver from ``open_checkpointer`` or
LangGraph's ``InMemorySaver``), now against the run-once record (issue 43): a step re-run on
another branch must not run a tool that is not idempotent again, and an honest flow must not be
stopped or asked again when nothing ran. The record holds the call by its key (thread, run,
tool, arguments as loop detection compares them, occurrence on its branch): found ``done``, the
model is shown what it returned, whatever the branch, the durability or the process.

Paid again before: three edits in a row (or one ``bulk_update_state`` of three supersteps)
put the branch point past the four checkpoints looked at, sync and async; under
``durability="exit"`` (racily ``"async"``) the step's own checkpoint was not stored, and the
newest stored one, the old branch's head, was taken for its parent. Stopped though nothing
ran: a breakpoint continued with the head's own ``checkpoint_id``; a call rejected, its
question forked, then approved. Paid again before, in a later round: a fork before ``decide``
continued with ``invoke(None)``, where the model proposes the same payment under a new id, and
a fork in an earlier step of the run (sync, async and exit durability).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, StateUpdate

from gated_react import Policy, aopen_checkpointer, build_graph, open_checkpointer, read
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools import idempotent

PAID: list[str] = []
CFG: Any = {"configurable": {"thread_id": "t"}}
APPROVAL = Policy(require_approval=frozenset({"pay"}))


@tool
def pay(item: str) -> str:
    """Pays (not idempotent)."""
    PAID.append(item)
    return f"paid {item}"


def _model_reply(messages: list[Any]) -> Any:
    """A model that pays for ``a`` until its branch of the thread shows a tool result since
    the last question."""
    asked = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    if any(isinstance(m, ToolMessage) for m in messages[asked:]):
        return "done"
    return call("pay", item="a")


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(replies=[_model_reply], cycle=True)


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    PAID.clear()
    yield
    PAID.clear()


def _graph(saver: Any, policy: Policy | None = None) -> Any:
    return build_graph(_model(), [pay], policy=policy or Policy(), checkpointer=saver)


def _shown(out: dict[str, Any]) -> list[str]:
    """What the model was shown of the branch's tool calls."""
    return [m.text for m in out["messages"] if m.type == "tool"]


def _before(graph: Any, node: str) -> Any:
    """The config of the thread's newest checkpoint before ``node``."""
    return next(s for s in graph.get_state_history(CFG) if s.next == (node,)).config


def _before_the_first_decide(graph: Any) -> Any:
    """The checkpoint before the ``decide`` that proposed the payment (no tool result yet)."""
    return next(
        s
        for s in graph.get_state_history(CFG)
        if s.next == ("decide",)
        and not any(isinstance(m, ToolMessage) for m in s.values.get("messages", []))
    ).config


# ---------------------------------------------------------------- false negatives: DEPTH


@pytest.mark.parametrize("how", ["update_state", "bulk_update_state"])
def test_three_edits_in_a_row_on_an_old_checkpoint_pay_again_unasked(store: Any, how: str) -> None:
    """HIGH. One edit (``update_state(old, None, as_node="validate")``) on the checkpoint
    before the gate of a paid step stops ``tool_outcome_unknown``; two edits too. Three edits
    that write nothing (three ``update_state`` calls, or one ``bulk_update_state`` of three
    supersteps) put the branch point 5 checkpoints back, past ``DEPTH`` = 4: the payment ran
    2 times, unasked, and the run reads ``success``."""
    graph = _graph(store)
    assert graph.invoke({"goal": "pay a"}, CFG)["stop_reason"] == "success"
    old = _before(graph, "gate")
    if how == "update_state":
        graph.update_state(old, None, as_node="validate")
        graph.update_state(CFG, None, as_node="validate")
        graph.update_state(CFG, None, as_node="validate")
    else:
        graph.bulk_update_state(old, [[StateUpdate(None, "validate")]] * 3)
    assert graph.get_state(CFG).next == ("gate",)
    out = graph.invoke(None, CFG)
    assert PAID == ["a"], f"paid {len(PAID)} times, unasked (stop {out['stop_reason']})"
    assert (out["stop_reason"], _shown(out)) == ("success", ["paid a"])


def test_three_edits_in_a_row_pay_again_under_ainvoke(tmp_path: Path) -> None:
    """HIGH, async twin (``aon_a_branch``): three ``aupdate_state`` edits on the checkpoint
    before the gate, then ``ainvoke(None)``: paid 2 times, unasked."""

    async def main() -> dict[str, Any]:
        async with aopen_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
            graph = _graph(saver)
            await graph.ainvoke({"goal": "pay a"}, CFG)
            history = [s async for s in graph.aget_state_history(CFG)]
            old = next(s for s in history if s.next == ("gate",)).config
            await graph.aupdate_state(old, None, as_node="validate")
            await graph.aupdate_state(CFG, None, as_node="validate")
            await graph.aupdate_state(CFG, None, as_node="validate")
            out: dict[str, Any] = await graph.ainvoke(None, CFG)
            return out

    out = asyncio.run(main())
    assert PAID == ["a"], f"paid {len(PAID)} times, unasked (stop {out['stop_reason']})"


# ---------------------------------------------------------------- false negatives: durability


@pytest.mark.parametrize("saver", ["sqlite", "memory"])
def test_a_replay_sent_as_a_resume_with_exit_durability_pays_again(
    tmp_path: Path, saver: str
) -> None:
    """HIGH. ``invoke(Command(resume=1), before_gate)`` stops ``tool_outcome_unknown`` (the
    fixed replay of ``test_execute_branches``); the same with ``durability="exit"`` paid 2
    times, unasked, run ``success``: the step's own checkpoints are not stored, the newest
    stored one is the old branch's head, and ``_Walk`` follows it as the step's parent."""
    opened = open_checkpointer(str(tmp_path / "runs.sqlite")) if saver == "sqlite" else None
    with opened or nullcontext(InMemorySaver()) as store:
        graph = _graph(store)
        graph.invoke({"goal": "pay a"}, CFG)
        out = graph.invoke(Command(resume=1), _before(graph, "gate"), durability="exit")
    assert PAID == ["a"], f"paid {len(PAID)} times, unasked (stop {out['stop_reason']})"
    assert (out["stop_reason"], _shown(out)) == ("success", ["paid a"])


@pytest.mark.parametrize("first", [None, "exit"], ids=["second answer", "both answers"])
def test_an_approval_sent_twice_with_exit_durability_pays_twice(store: Any, first: Any) -> None:
    """HIGH. Approved once with the question's config, the same approval sent again with
    ``durability="exit"`` paid 2 times for one question. Issue 43: with ``"exit"`` on both
    answers too (the first answer's checkpoints are then never stored, so no branch of the
    thread shows the payment)."""
    graph = _graph(store, APPROVAL)
    graph.invoke({"goal": "pay a"}, CFG)
    asked = graph.get_state(CFG).config
    approve: Command[Any] = Command(resume={"approved": True})
    assert graph.invoke(approve, asked, durability=first)["stop_reason"] == "success"
    out = graph.invoke(approve, asked, durability="exit")
    if "__interrupt__" in out:  # asked again, at the step the run is at now: approved again
        assert [i.value["kind"] for i in out["__interrupt__"]] == ["approval"]
        out = graph.invoke(approve, CFG, durability="exit")
    assert PAID == ["a"], f"paid {len(PAID)} times for one question"
    assert (out["stop_reason"], _shown(out)) == ("success", ["paid a"])


def test_an_approval_sent_twice_with_async_durability_pays_twice(tmp_path: Path) -> None:
    """MEDIUM (racy). As above with ``durability="async"``: whether the step's own checkpoint
    is stored when ``execute`` lists the thread is a race; over 20 threads (each approved once,
    then the same approval sent again) 20 payments must be made; measured: 33 payments for 20
    questions (13 of 20 threads paid 2 times; 6 of 10 in an earlier run)."""
    payments = 0
    for attempt in range(20):
        PAID.clear()
        with open_checkpointer(str(tmp_path / f"runs{attempt}.sqlite")) as store:
            graph = _graph(store, APPROVAL)
            graph.invoke({"goal": "pay a"}, CFG)
            asked = graph.get_state(CFG).config
            approve: Command[Any] = Command(resume={"approved": True})
            graph.invoke(approve, asked)
            graph.invoke(approve, asked, durability="async")
        payments += len(PAID)
    assert payments == 20, f"{payments} payments for 20 questions approved once each"


# ---------------------------------------------------------------- false positives


@pytest.mark.parametrize("held_before", ["gate", "execute"])
def test_a_breakpoint_continued_with_the_heads_checkpoint_id_stops_though_nothing_ran(
    store: Any, held_before: str
) -> None:
    """MEDIUM (older than the branch check: ``is_time_travel``). A run held by
    ``interrupt_before`` and continued with the config ``get_state`` returns (the head's own
    checkpoint_id, what a client or Studio-like UI holds): paid 0 times and the run stops
    ``tool_outcome_unknown:pay`` although nothing had run on any branch; held before the gate,
    the gate had not even admitted the call yet. Continued without the id it pays once."""
    graph = _graph(store)
    graph.invoke({"goal": "pay a"}, CFG, interrupt_before=[held_before])
    head = graph.get_state(CFG).config
    assert head["configurable"].get("checkpoint_id")
    out = graph.invoke(None, head)
    assert (PAID, out["stop_reason"]) == (["a"], "success"), (
        f"paid {len(PAID)} times, stop {out['stop_reason']}"
    )


def test_a_rejected_call_forked_and_approved_is_asked_again_as_may_have_run(store: Any) -> None:
    """LOW. The human rejects ``pay(a)`` (run ``tool_rejected:pay``, paid 0 times), then forks
    the question's checkpoint (``update_state(question, None, as_node="validate")``) to change
    their mind and approves the question asked again: instead of paying, the run asks a third
    question, ``outcome_unknown`` ("may already have run"), though the other branch recorded
    only a rejection; paid 0 times after 2 answers."""
    graph = _graph(store, APPROVAL)
    graph.invoke({"goal": "pay a"}, CFG)
    question = graph.get_state(CFG).config
    out = graph.invoke(Command(resume={"approved": False}), CFG)
    assert out["stop_reason"] == "tool_rejected:pay"
    graph.update_state(question, None, as_node="validate")
    asked = graph.invoke(None, CFG)["__interrupt__"][0].value
    assert asked["kind"] == "approval"
    out = graph.invoke(Command(resume={"approved": True}), CFG)
    kinds = [i.value.get("kind") for i in out.get("__interrupt__", [])]
    assert (PAID, kinds) == (["a"], []), f"paid {len(PAID)} times, asked again: {kinds}"


# ---------------------------------------------------------------- false negatives: a fork


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_fork_before_decide_continued_on_the_thread_does_not_pay_again(
    store: Any, durability: Any
) -> None:
    """A fork written by ``update_state`` on the checkpoint before the decision that paid,
    continued with ``invoke(None)``: the model proposes the same payment again, at the same
    step, with a new tool call id; the gate took it for a new one and it ran 2 times, unasked.
    Its idempotency key (thread, step, tool, arguments) is the one the other branch's gate let
    through: it may have run."""
    graph = _graph(store)
    assert graph.invoke({"goal": "pay a"}, CFG)["stop_reason"] == "success"
    graph.update_state(_before_the_first_decide(graph), None, as_node="observe")
    assert graph.get_state(CFG).next == ("decide",)
    out = graph.invoke(None, CFG, durability=durability)
    assert PAID == ["a"], f"paid {len(PAID)} times, unasked (stop {out['stop_reason']})"
    assert (out["stop_reason"], _shown(out)) == ("success", ["paid a"])


def test_a_fork_before_decide_does_not_pay_again_under_ainvoke(tmp_path: Path) -> None:
    """The async twin (``aon_a_branch``); and a later turn of another thread that asks for the
    same payment again, under ``durability="async"`` (its step's checkpoints not stored yet,
    so its saver's record is searched), is paid: its call has the key of the first turn's, and
    a key counts only on another branch made since the step began."""

    async def main() -> list[str]:
        async with aopen_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
            graph = _graph(saver)
            await graph.ainvoke({"goal": "pay a"}, CFG)
            history = [s async for s in graph.aget_state_history(CFG)]
            first = next(
                s
                for s in history
                if s.next == ("decide",)
                and not any(isinstance(m, ToolMessage) for m in s.values.get("messages", []))
            )
            await graph.aupdate_state(first.config, None, as_node="observe")
            ends = [(await graph.ainvoke(None, CFG))["stop_reason"]]
            other: Any = {"configurable": {"thread_id": "u"}}
            for words in ("pay a", "pay a again"):
                turn = {"messages": [HumanMessage(words)]}
                ends.append((await graph.ainvoke(turn, other, durability="async"))["stop_reason"])
            return ends

    assert asyncio.run(main()) == ["success", "success", "success"]
    assert PAID == ["a", "a", "a"]  # thread t's first run, thread u's two turns


@idempotent
@tool
def look_up(item: str) -> str:
    """The price of an item (idempotent)."""
    return f"{item} costs 5"


def _planned(messages: list[Any]) -> Any:
    """Per question: look the item up, then pay it, then answer."""
    asked = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    done = sum(isinstance(m, ToolMessage) for m in messages[asked:])
    return [call("look_up", item="a"), call("pay", item="a"), "done"][min(done, 2)]


def _first_gate(graph: Any) -> Any:
    """The checkpoint before the gate of step 1 (the look-up)."""
    return [s for s in graph.get_state_history(CFG) if s.next == ("gate",)][-1].config


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_fork_in_an_earlier_step_of_the_run_does_not_pay_again(
    tmp_path: Path, durability: Any
) -> None:
    """Found by an outside tester (each row paid again, unasked): forked at step 1's gate as
    if observed, the run looks the item up again at step 2 and proposes the payment at step 3,
    where the other branch paid at step 2; continued under ``durability="async"`` or
    ``"exit"``, the fork's own checkpoints were not stored and only the same call's id was
    looked for. The same tool with the same arguments, let through on another branch of the
    same run, is the same call (one branch never runs it twice: loop detection)."""
    model = ScriptedChatModel(replies=[_planned], cycle=True)
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        graph = build_graph(model, [look_up, pay], checkpointer=saver)
        assert graph.invoke({"goal": "pay a"}, CFG)["stop_reason"] == "success"
        graph.update_state(_first_gate(graph), None, as_node="observe")
        out = graph.invoke(None, CFG, durability=durability)
        again = graph.invoke({"messages": [HumanMessage("pay a again")]}, CFG)
    assert (out["stop_reason"], _shown(out)[-1]) == ("success", "paid a")
    assert again["stop_reason"] == "success"  # a later question is a new request
    assert PAID == ["a", "a"]


SAME_GOAL = pytest.mark.xfail(
    strict=True,
    reason="src: a goal's question id is made of the thread, its position and the goal, so the "
    "same goal submitted again from the same checkpoint (a regenerate) is the same run, and its "
    "payment is answered from the record instead of made",
)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("kind", ["messages", pytest.param("goal", marks=SAME_GOAL)])
def test_a_chat_uis_regenerate_is_a_new_request_and_pays(
    tmp_path: Path, durability: Any, kind: str
) -> None:
    """A chat UI's edit or regenerate submits a new input from the checkpoint before the
    turn: a new question, so a new run, and a new request. Both stopped
    ``tool_outcome_unknown`` before the branch check learnt it (found by outside testers: a
    message, then a goal)."""

    def asks(text: str) -> dict[str, Any]:
        return {"messages": [HumanMessage(text)]} if kind == "messages" else {"goal": text}

    model = ScriptedChatModel(replies=[_model_reply], cycle=True)
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        graph = build_graph(model, [pay], checkpointer=saver)
        graph.invoke(asks("hello, pay a"), CFG, durability=durability)
        before = graph.get_state(CFG).config
        graph.invoke(asks("pay a"), CFG, durability=durability)
        out = graph.invoke(asks("pay a"), before, durability=durability)
    assert out["stop_reason"] == "success"
    assert PAID == ["a", "a", "a"]


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("kind", ["messages", "goal"])
def test_a_replay_of_the_runs_input_does_not_pay_again(
    tmp_path: Path, kind: str, durability: Any
) -> None:
    """Time travel to the run's input checkpoint re-asks its question: the same run, whose
    record says the payment is done. It paid again in 6 to 10 of 10 trials (found by an
    outside tester). The replays' model calls count against the run's budgets, so the later
    ones may stop on ``max_steps``: none pays."""
    model = ScriptedChatModel(replies=[_model_reply], cycle=True)
    said = {"role": "user", "content": "pay a"}  # as a chat client sends it, no id
    asked = {"messages": [said]} if kind == "messages" else {"goal": "pay a"}
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        graph = build_graph(model, [pay], checkpointer=saver)
        graph.invoke(asked, CFG, durability=durability)
        (started,) = [s for s in graph.get_state_history(CFG) if s.metadata["source"] == "input"]
        outs = [graph.invoke(None, started.config, durability=durability) for _ in range(5)]
    assert PAID == ["a"], f"paid {len(PAID)} times for one question"
    assert outs[0]["stop_reason"] == "success"
    assert _shown(outs[0]) == ["paid a"]


@tool
def transfer(amount: float) -> str:
    """Sends money (not idempotent)."""
    PAID.append(f"{amount:g}")
    return f"sent {amount:g}"


def test_a_fork_whose_model_spells_the_amount_another_way_pays_once(store: Any) -> None:
    """Issue 43: under ``loop_detection="normalized"``, a fork whose model re-proposes
    ``transfer(amount="5")`` as ``amount=5.0`` (a new call id, arguments that compare equal
    only normalized) paid twice. The call's key is made of its arguments as loop detection
    compares them: the record says it is done."""
    spelled: list[Any] = []

    def reply(messages: list[Any]) -> Any:
        asked = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        if any(isinstance(m, ToolMessage) for m in messages[asked:]):
            return "done"
        spelled.append("5" if not spelled else 5.0)
        return call("transfer", amount=spelled[-1])

    model = ScriptedChatModel(replies=[reply], cycle=True)
    policy = Policy(loop_detection="normalized")
    graph = build_graph(model, [transfer], policy=policy, checkpointer=store)
    assert graph.invoke({"goal": "send 5"}, CFG)["stop_reason"] == "success"
    graph.update_state(_before_the_first_decide(graph), None, as_node="observe")
    out = graph.invoke(None, CFG)
    assert spelled == ["5", 5.0]
    assert PAID == ["5"], f"paid {len(PAID)} times"
    assert (out["stop_reason"], _shown(out)) == ("success", ["sent 5"])


@pytest.mark.parametrize("tool_name", ["pay", "get_profile"])
def test_a_step_let_through_then_lost_with_its_reply_counts_no_call(tool_name: str) -> None:
    """The kill storm's known case (TRACED_TWICE), made by hand: the gate let a call through
    (its permit recorded), then the process died before the step's reply was stored, so the
    model was asked again and proposed the call under a new id. Before: the run counted two
    tool calls (``max_tool_calls=1`` stopped it) and its trace held the call that never ran."""

    @tool
    def get_profile(item: str) -> str:
        """Reads a profile (idempotent)."""
        return f"profile {item}"

    def reply(messages: list[Any]) -> Any:
        done = any(isinstance(m, ToolMessage) for m in messages)
        return "done" if done else call(tool_name, item="a")

    tools = [pay, idempotent(get_profile)]
    model = ScriptedChatModel(replies=[reply], cycle=True)
    graph = build_graph(model, tools, policy=Policy(budget={"max_tool_calls": 1}),
                        checkpointer=InMemorySaver())  # fmt: skip
    graph.invoke({"goal": "go"}, CFG, interrupt_after=["gate"])
    lost = _before(graph, "decide")  # the reply and the gate's step, lost with the process
    graph.invoke(None, lost)
    out = read(graph, "t")
    assert (out["status"], out["stop_reason"]) == ("ok", "success"), out["message"]
    assert out["usage"]["tool_calls"] == 1
    assert out["usage"]["per_tool"] == {tool_name: 1}
    assert [t["tool"] for t in out["trace"]] == [tool_name]  # the call that ran, once
    assert out["trace"][0]["ok"]
