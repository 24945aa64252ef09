"""A step re-run on a branch of its thread, which LangGraph does not mark as time travel, does
not run a tool that is not idempotent again (found by an outside tester, December 2026; each
test failed before, through a real SqliteSaver). LangGraph marks a replay as time travel only
when a run addresses a ``checkpoint_id`` and its input is not a ``Command(resume=...)``; a
resume sent to an old checkpoint (an approval sent twice, a replay sent as a resume) and a fork
that ``update_state`` writes on an old checkpoint, continued with ``invoke(None)``, re-ran the
paid step and the payment ran again. The call's run-once record, keyed by the call (thread,
run, tool, arguments, occurrence on its branch), now says it finished, on every branch: the
model is shown what it returned, and it does not run again.

Also: ``status`` written alone just before the gate refused a call made the stop node take
the run for ended, and the policy stop read as ``ok`` (exit code 0): a status that does not
agree with the stop reason is no end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from langchain_core.tools import tool
from langgraph.types import Command

from gated_react import Policy, aopen_checkpointer, build_graph
from gated_react.graph import GatedGraph
from gated_react.testing import ScriptedChatModel, call

from ..support.fakes import RAN, pay

CFG: Any = {"configurable": {"thread_id": "t"}}
APPROVAL = Policy(require_approval=frozenset({"pay"}))


def _graph(saver: Any, policy: Policy) -> GatedGraph:
    replies = [call("pay", item="a"), *["done"] * 5]
    return build_graph(ScriptedChatModel(replies=replies), [pay], policy=policy, checkpointer=saver)


def _before(graph: GatedGraph, node: str) -> Any:
    """The config (with its checkpoint_id) of the thread's newest checkpoint before ``node``."""
    return next(s for s in graph.get_state_history(CFG) if s.next == (node,)).config


def _shown(out: dict[str, Any]) -> list[str]:
    """What the model was shown of the branch's tool calls."""
    return [m.text for m in out["messages"] if m.type == "tool"]


def test_a_replay_sent_as_a_resume_pays_again_unasked(store: Any) -> None:
    """A run paid once and ended ``success``. The replay from before the gate sent as
    ``Command(resume=<anything>)`` with the old checkpoint_id is not seen as time travel: the
    payment ran 2 times, no human was asked (no approval policy). Now the record answers it."""
    graph = _graph(store, Policy())
    assert graph.invoke({"goal": "pay a"}, CFG)["stop_reason"] == "success"
    old = _before(graph, "gate")
    out = graph.invoke(Command(resume="anything"), old)
    assert RAN == ["pay a"], f"the payment ran {len(RAN)} times, unasked"
    assert (out["stop_reason"], _shown(out)) == ("success", ["paid a"])


def test_a_replay_sent_as_a_resume_pays_again_unasked_under_ainvoke_and_astream(
    tmp_path: Path,
) -> None:
    """The async twin: ``ainvoke(Command(resume=1), old)`` and ``astream`` of the same each
    paid again (3 payments for one the model asked for)."""

    async def main() -> None:
        async with aopen_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
            graph = _graph(saver, Policy())
            await graph.ainvoke({"goal": "pay a"}, CFG)
            history = [s async for s in graph.aget_state_history(CFG)]
            old = next(s for s in history if s.next == ("gate",)).config
            await graph.ainvoke(Command(resume=1), old)
            async for _ in graph.astream(Command(resume=1), old, stream_mode="updates"):
                pass

    asyncio.run(main())
    assert RAN == ["pay a"], f"the payment ran {len(RAN)} times, unasked"


def test_an_approval_sent_twice_with_the_questions_checkpoint_pays_twice(store: Any) -> None:
    """Under ``require_approval``: the human approves the question once, with the config
    ``get_state`` returned (its checkpoint_id, as Studio sends ``checkpoint`` beside a
    resume). The same approval sent again (a retried request, a second click) replays the
    gate's question from the old checkpoint and the payment ran 2 times; the second approval
    was taken as the answer to the old question, nobody was told the call may have run
    already (the question a replay should ask, ``outcome_unknown``, was never raised)."""
    graph = _graph(store, APPROVAL)
    graph.invoke({"goal": "pay a"}, CFG)
    asked = graph.get_state(CFG).config  # carries the checkpoint_id of the question
    approve = Command(resume={"approved": True})
    assert graph.invoke(approve, asked)["stop_reason"] == "success"
    out = graph.invoke(approve, asked)
    assert RAN == ["pay a"], f"the payment ran {len(RAN)} times for one question"
    assert "__interrupt__" not in out  # the record says what came of it: nobody need be asked
    assert (out["stop_reason"], _shown(out)) == ("success", ["paid a"])


def test_a_fork_of_an_old_checkpoint_continued_on_the_thread_pays_again_unasked(
    store: Any,
) -> None:
    """``update_state(old_config, None, as_node="validate")``, an edit that writes no channel
    at all, forks the checkpoint before the gate of a step that had paid; the fork is now the
    thread's head, so ``invoke(None, {"thread_id": "t"})`` names no checkpoint_id and is not
    seen as time travel: the payment ran 2 times, unasked, and the run reads ``success``
    (``invoke(None, fork_config)`` stopped ``tool_outcome_unknown`` as documented)."""
    graph = _graph(store, Policy())
    graph.invoke({"goal": "pay a"}, CFG)
    graph.update_state(_before(graph, "gate"), None, as_node="validate")
    assert graph.get_state(CFG).next == ("gate",)
    out = graph.invoke(None, CFG)
    assert RAN == ["pay a"], f"the payment ran {len(RAN)} times, unasked"
    assert (out["stop_reason"], _shown(out)) == ("success", ["paid a"])


@tool
def delete_account(user: str) -> str:
    """Deletes an account (no policy below allows it)."""
    RAN.append(f"delete {user}")
    return "gone"


def test_a_status_written_alone_makes_a_denied_tool_read_as_success(store: Any) -> None:
    """One channel: ``update_state({"status": "ok"}, as_node="validate")`` just before the gate
    refuses ``delete_account``. The gate stops the run ``tool_denied:delete_account``, but the
    stop node takes the edited status for an ended run and writes nothing: the thread ends with
    status ``ok`` beside a policy stop (1 of 1 refused calls reads as success), no "I stopped"
    message, and ``gated-react resume``'s exit code for it is 0 (success) instead of 2
    (policy stop). Nothing ran (0 deletions): the gate held, its verdict's record did not."""
    from gated_react.cli.live.session import exit_code
    from gated_react.runs import read

    graph = build_graph(
        ScriptedChatModel(replies=[call("delete_account", user="u")]),
        [pay, delete_account],
        policy=Policy(allow=frozenset({"pay"})),
        checkpointer=store,
    )
    graph.invoke({"goal": "close u"}, CFG, interrupt_before=["gate"])
    graph.update_state(CFG, {"status": "ok"}, as_node="validate")
    graph.invoke(None, CFG)
    result = read(graph, "t")
    assert RAN == []
    assert result["stop_reason"] == "tool_denied:delete_account"
    assert (result["status"], int(exit_code(result))) == ("stopped", 2), (
        f"status {result['status']!r}, exit code {int(exit_code(result))}"
    )


def test_a_copied_thread_does_not_pay_again(tmp_path: Path) -> None:
    """A thread held before execute, its rows copied under another thread id (what a server's
    thread copy does), and the original then paid: the copy's run has no permit of its own,
    so its call goes through the gate again; the run-once record knows the call by its id in
    any thread, and says it is done."""
    from gated_react import open_checkpointer

    from ..support.tamper import copy_rows

    db = str(tmp_path / "runs.sqlite")
    with open_checkpointer(db) as saver:
        graph = _graph(saver, Policy())
        graph.invoke({"goal": "pay a"}, CFG, interrupt_before=["execute"])
        upto = graph.get_state(CFG).config["configurable"]["checkpoint_id"]
        assert graph.invoke(None, CFG)["stop_reason"] == "success"
        assert copy_rows(db, "t", "copy", upto=upto, writes_before=False) > 0
        out = graph.invoke(None, {"configurable": {"thread_id": "copy"}})
    assert RAN == ["pay a"], f"the payment ran {len(RAN)} times"
    assert (out["stop_reason"], _shown(out)) == ("success", ["paid a"])
