"""run / resume / read on a real SQLite store, and the per-thread lock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from gated_react import (
    NotWaiting,
    Policy,
    ThreadBusy,
    ThreadExists,
    UnknownThread,
    aresult_of,
    aresume,
    arun,
    build_graph,
    open_checkpointer,
    read,
    result_of,
    resume,
    run,
)
from gated_react._engine.execution.call_keys import args_hash
from gated_react.runs import config_for
from gated_react.state import RESULT_KEYS, ThreadResult
from gated_react.store.checkpointer import aopen_checkpointer
from gated_react.store.locks import thread_lock
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from .support.helpers import REFUND_42
from .support.results import invoked

APPROVAL = Policy(require_approval=frozenset({"get_user_billing"}))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        yield saver


def _graph(saver: Any, replies: list[Any], policy: Policy = APPROVAL) -> Any:
    return build_graph(
        ScriptedChatModel(replies=replies), SUPPORT_TOOLS, policy=policy, checkpointer=saver
    )


def test_run_returns_the_result_shape_with_thread_id(store: Any) -> None:
    out = run(_graph(store, REFUND_42, Policy()), "refund?", thread_id="t-1")
    assert out["thread_id"] == "t-1"
    assert out["pending"] == []
    assert out["stop_reason"] == "success"
    assert read(_graph(store, []), "t-1") == out


def test_a_paused_run_waits_and_resumes_with_the_answer(store: Any) -> None:
    graph = _graph(store, [call("get_user_billing", user_id=42), "USD 49"])
    paused = run(graph, "refund?")
    assert paused["status"] == "paused"
    assert read(graph, paused["thread_id"])["status"] == "paused"
    assert paused["pending"][0]["tool"] == "get_user_billing"
    assert resume(graph, paused["thread_id"]) == paused  # no answer: nothing runs
    done = resume(graph, paused["thread_id"], {"approved": True})
    assert done["stop_reason"] == "success"
    assert done["pending"] == []


def test_resuming_a_finished_run_runs_nothing(store: Any) -> None:
    out = run(_graph(store, REFUND_42, Policy()), "refund?")
    idle = ScriptedChatModel(replies=[])
    graph = build_graph(idle, SUPPORT_TOOLS, checkpointer=store)
    assert resume(graph, out["thread_id"]) == out
    assert idle.requests == []


def test_unknown_and_existing_threads_are_clear_errors(store: Any) -> None:
    graph = _graph(store, REFUND_42, Policy())
    with pytest.raises(UnknownThread, match="nope"):
        resume(graph, "nope")
    with pytest.raises(UnknownThread):
        read(graph, "nope")
    run(graph, "refund?", thread_id="taken")
    with pytest.raises(ThreadExists, match="taken"):
        run(graph, "again", thread_id="taken")


def test_a_second_advancer_gets_thread_busy_and_changes_nothing(store: Any) -> None:
    graph = _graph(store, [call("get_user_billing", user_id=42), "USD 49"])
    paused = run(graph, "refund?")
    before = read(graph, paused["thread_id"])
    with thread_lock(store, paused["thread_id"]), pytest.raises(ThreadBusy):
        resume(graph, paused["thread_id"], {"approved": True})
    assert read(graph, paused["thread_id"]) == before


def test_async_twins(tmp_path: Path) -> None:
    async def main() -> dict[str, Any]:
        async with aopen_checkpointer(str(tmp_path / "a.sqlite")) as saver:
            graph = _graph(saver, [call("get_user_billing", user_id=42), "USD 49"])
            paused = await arun(graph, "refund?")
            return await aresume(graph, paused["thread_id"], {"approved": True})

    assert asyncio.run(main())["stop_reason"] == "success"


def test_on_update_streams_every_node_and_returns_the_same_result(store: Any) -> None:
    seen: list[str] = []
    graph = _graph(store, [call("get_user_billing", user_id=42), "USD 49"])
    paused = run(graph, "refund?", thread_id="s", on_update=lambda node, _: seen.append(node))
    assert seen == ["decide", "validate", "__interrupt__"]
    assert paused == read(graph, "s")
    done = resume(graph, "s", {"approved": True}, on_update=lambda node, _: seen.append(node))
    assert seen[3:] == ["gate", "execute", "observe", "decide", "validate", "finish"]
    assert done == read(graph, "s")
    assert done["stop_reason"] == "success"


def test_async_on_update(tmp_path: Path) -> None:
    seen: list[str] = []

    async def main() -> dict[str, Any]:
        async with aopen_checkpointer(str(tmp_path / "a.sqlite")) as saver:
            graph = _graph(saver, [call("get_user_billing", user_id=42), "USD 49"])
            paused = await arun(graph, "refund?", on_update=lambda n, _: seen.append(n))
            assert paused["pending"]
            return await aresume(
                graph,
                paused["thread_id"],
                {"approved": True},
                on_update=lambda n, _: seen.append(n),
            )

    assert asyncio.run(main())["answer"] == "USD 49"
    assert seen[-3:] == ["decide", "validate", "finish"]
    assert "__interrupt__" in seen


def test_an_answer_naming_its_question_never_answers_the_next_one(store: Any) -> None:
    policy = Policy(require_approval=frozenset({"get_user_billing", "search_policy"}))
    replies = [call("get_user_billing", user_id=42), call("search_policy", query="refund"), "49"]
    graph = _graph(store, replies, policy)
    paused = run(graph, "refund?")
    thread, first = paused["thread_id"], paused["pending"][0]
    assert first["tool"] == "get_user_billing"
    assert read(graph, thread)["pending"][0]["id"] == first["id"]
    second = resume(graph, thread, {"approved": True}, question=first["id"])["pending"][0]
    assert second["tool"] == "search_policy"
    with pytest.raises(NotWaiting, match=first["id"]):  # the same answer, delivered twice
        resume(graph, thread, {"approved": True}, question=first["id"])
    assert read(graph, thread)["pending"] == [second]
    done = resume(graph, thread, {"approved": True}, question=second["id"])
    assert done["stop_reason"] == "success"


def test_an_answer_for_a_run_that_waits_on_nothing_is_refused(store: Any) -> None:
    graph = _graph(store, REFUND_42, Policy())
    out = run(graph, "refund?")
    with pytest.raises(NotWaiting, match="not waiting for an answer"):  # finished
        resume(graph, out["thread_id"], {"approved": True})
    assert read(graph, out["thread_id"]) == out
    with pytest.raises(NotWaiting, match="not waiting for an answer"):
        _settled_on_a_crashed_thread(store)


def _settled_on_a_crashed_thread(store: Any) -> None:
    """A thread stopped between nodes, as a crash leaves it: next node known, no question."""
    graph = _graph(store, [call("get_user_profile", user_id=42), "done"], Policy())
    graph.update_state(config_for("crashed"), {"goal": "refund?"}, as_node="__start__")
    resume(graph, "crashed", {"approved": True})


def test_every_result_has_every_key_whatever_happened(store: Any) -> None:
    keys = {*RESULT_KEYS, "answer", "history", "trace", "usage", "thread_id", "pending"}
    assert set(ThreadResult.__annotations__) == keys
    graph = _graph(store, [call("get_user_billing", user_id=42), "USD 49"])
    paused = run(graph, "refund?")
    stopped = run(_graph(store, [call("nope")], Policy()), "refund?")
    done = resume(graph, paused["thread_id"], {"approved": True})
    for result in (paused, stopped, done, read(graph, paused["thread_id"])):
        assert set(result) == keys
    assert [r["status"] for r in (paused, stopped, done)] == ["paused", "stopped", "ok"]


def test_approval_without_a_checkpointer_is_a_clear_stop_not_a_shapeless_dict() -> None:
    graph = build_graph(
        ScriptedChatModel(replies=[call("get_user_billing", user_id=42)]),
        SUPPORT_TOOLS,
        policy=APPROVAL,
    )
    out = invoked(graph, {"goal": "refund?"})
    assert (out["status"], out["stop_reason"]) == (
        "stopped",
        "approval_unavailable:get_user_billing",
    )
    assert "no checkpointer" in out["message"]
    assert out["trace"][0]["stop_reason"] == out["stop_reason"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"user_id": 10**30}, "no store can hold it"),
        ({"user_id": "forty-two"}, "user_id"),
        ({"user": 42}, "unknown arguments"),
    ],
)
def test_edited_arguments_that_cannot_run_or_be_stored_ask_again(
    store: Any, args: dict[str, Any], error: str
) -> None:
    graph = _graph(store, [call("get_user_billing", user_id=42), "USD 49"])
    thread = run(graph, "refund?")["thread_id"]
    again = resume(graph, thread, {"approved": True, "args": args})
    assert again["status"] == "paused"
    assert error in again["pending"][0]["error"]
    assert again["trace"] == []
    assert again["usage"]["tool_calls"] == 0
    done = resume(graph, thread, {"approved": True, "args": {"user_id": 7}})
    assert done["stop_reason"] == "success"
    # the conversation keeps the model's call; what ran is the human's edit, as history shows
    proposed, result = done["messages"][1:3]
    assert proposed.tool_calls[0]["args"] == {"user_id": 42}
    assert '{"user_id": 7} instead of the arguments in your call' in result.text
    (entry,) = done["history"]
    assert entry["action"]["args"] == {"user_id": 7}
    assert entry["observation"]["billing"]["plan"] == "free"  # user 7's billing, not 42's
    assert done["trace"][0]["args_hash"] == args_hash({"user_id": 7})


def test_none_is_not_an_answer_it_asks_again(store: Any) -> None:
    graph = _graph(store, [call("get_user_billing", user_id=42), "USD 49"])
    thread = run(graph, "refund?")["thread_id"]
    again = resume(graph, thread, None)
    assert again["status"] == "paused"
    assert "None is not an answer" in again["pending"][0]["error"]
    assert resume(graph, thread, {"approved": True})["stop_reason"] == "success"


def test_an_answer_to_a_finished_thread_says_the_run_has_ended(store: Any) -> None:
    out = run(_graph(store, REFUND_42, Policy()), "refund?")
    with pytest.raises(NotWaiting, match="its run has ended"):
        resume(_graph(store, []), out["thread_id"], {"approved": True})


def test_a_question_asked_again_is_still_answered_under_its_first_id() -> None:
    """An answer that is not understood asks again under a new id (LangGraph's); the question
    keeps the ids it was asked under, so an app that kept the first one is not told NotWaiting."""
    from langgraph.checkpoint.memory import InMemorySaver

    from gated_react import NotWaiting, Policy, build_graph, resume, run
    from gated_react.testing import ScriptedChatModel, call
    from gated_react.tools.support import SUPPORT_TOOLS

    model = ScriptedChatModel(replies=[call("get_user_billing", user_id=42), "USD 49."])
    policy = Policy(require_approval={"get_user_billing"})
    graph = build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=InMemorySaver())
    first = run(graph, "Bill user 42.", thread_id="asked")["pending"][0]
    assert first["asked_as"] == []
    again = resume(graph, "asked", {"approved": "maybe"}, question=first["id"])["pending"][0]
    assert again["id"] != first["id"]
    assert again["asked_as"] == [first["id"]]
    with pytest.raises(NotWaiting):
        resume(graph, "asked", {"approved": True}, question="not-a-question-id")
    done = resume(graph, "asked", {"approved": True}, question=first["id"])
    assert done["stop_reason"] == "success"


def test_run_context_is_what_the_threads_latest_run_ran_under(tmp_path: Path) -> None:
    """Read from the record the run's first decision wrote (``opened``): None before a run, the
    same context from an async saver's record through the async twin."""
    from gated_react.runs import arun_context, run_context

    policy = Policy().replace(max_steps=3)
    with open_checkpointer(str(tmp_path / "s.sqlite")) as saver:
        graph = _graph(saver, ["done"], policy)
        assert run_context(graph, "ctx") is None
        run(graph, "hello", thread_id="ctx")
        found = run_context(graph, "ctx")

    async def main() -> dict[str, Any] | None:
        async with aopen_checkpointer(str(tmp_path / "a.sqlite")) as saver:
            graph = _graph(saver, ["done"], policy)
            await arun(graph, "hello", thread_id="ctx")
            return await arun_context(graph, "ctx")

    assert found is not None
    assert (found["model"], found["protocol"], found["policy"]["budget"]["max_steps"]) == (
        "scripted",
        "tools",
        3,
    )
    assert asyncio.run(main()) == found


def _refund_graph(saver: Any = None) -> Any:
    return build_graph(ScriptedChatModel(replies=REFUND_42), SUPPORT_TOOLS, checkpointer=saver)


def _hi_graph(saver: Any = None) -> Any:
    return build_graph(ScriptedChatModel(replies=["Hi."]), SUPPORT_TOOLS, checkpointer=saver)


def _read_as_its_own(out: ThreadResult) -> None:
    """The refund run's own trace and usage: 3 calls, 4 steps."""
    assert [t["tool"] for t in out["trace"]] == [h["action"]["name"] for h in out["history"]]
    assert (len(out["trace"]), out["usage"]["steps"]) == (3, 4)


@pytest.mark.parametrize("kind", ["goal", "messages"])
def test_result_of_an_unsaved_run_reads_its_own_record_after_another_request(kind: str) -> None:
    """Without a checkpointer each invocation is a run of its own: before, result_of read the
    newest run of the thread (None), another request's served meanwhile (1 step, no call)."""
    goal = "Can user 42 get a refund?"
    asked = {"goal": goal} if kind == "goal" else {"messages": [HumanMessage(goal)]}
    graph = _refund_graph()
    returned = graph.invoke(asked)
    _hi_graph().invoke({"messages": [HumanMessage("Say hi.")]})
    _read_as_its_own(result_of(graph, returned))
    _read_as_its_own(asyncio.run(aresult_of(graph, returned)))


def test_result_of_a_saved_run_reads_the_run_the_output_answers(store: Any) -> None:
    """Before: the thread's newest run, a later question's on the same thread."""
    config = config_for("later")
    returned = _refund_graph(store).invoke({"goal": "Can user 42 get a refund?"}, config)
    _hi_graph(store).invoke({"goal": "Say hi."}, config)
    _read_as_its_own(result_of(_refund_graph(store), returned, config))


def test_a_run_resumed_under_other_limits_records_them_and_shows_them(tmp_path: Path) -> None:
    """Before: a run resumed with another budget (``gated-react resume --max-seconds 1000``)
    went on under it while ``run_context`` and ``show`` gave the limits it opened with. Now
    the run records the context it goes on under, once, when it differs."""
    from gated_react.runs import run_book, run_context

    opened, later = APPROVAL.replace(max_steps=5), APPROVAL.replace(max_steps=9)
    replies = [call("get_user_billing", user_id=42), "done"]
    with open_checkpointer(str(tmp_path / "s.sqlite")) as saver:
        paused = run(_graph(saver, replies, opened), "bill?", thread_id="t")
        assert paused["status"] == "paused"
        assert run_context(_graph(saver, replies, later), "t")["policy"]["budget"]["max_steps"] == 5
        graph = _graph(saver, replies[1:], later)
        resumed = resume(graph, "t", answer={"approved": True})
        found = run_context(graph, "t")
        kinds = [r.kind.value for r in run_book(saver, "t").records]
    assert resumed["status"] == "ok"
    assert found is not None
    assert found["policy"]["budget"]["max_steps"] == 9
    assert kinds.count("opened") == 2  # once more, under the limits in force


def test_a_resume_under_other_limits_that_ends_in_execute_shows_them(tmp_path: Path) -> None:
    """Before: the context was recorded again only by a decision, so a resume that ended in
    ``execute`` (its tool failed) kept showing the limits the run opened with."""
    from gated_react.runs import run_context

    from .support.fakes import broken

    asks = Policy(require_approval=frozenset({"broken"}), on_tool_error="stop")
    opened, later = asks.replace(max_seconds=8), asks.replace(max_seconds=1000)
    with open_checkpointer(str(tmp_path / "s.sqlite")) as saver:
        model = ScriptedChatModel(replies=[call("broken")])
        run(build_graph(model, [broken], policy=opened, checkpointer=saver), "go", thread_id="t")
        graph = build_graph(ScriptedChatModel(replies=[]), [broken], policy=later,
                            checkpointer=saver)  # fmt: skip
        ended = resume(graph, "t", answer={"approved": True})
        found = run_context(graph, "t")
    assert ended["stop_reason"] == "tool_error:broken"
    assert found is not None
    assert found["policy"]["budget"]["max_seconds"] == 1000


def test_aread_reads_what_read_reads_through_an_async_checkpointer(tmp_path: Path) -> None:
    """Before: an async app had no way to read a thread without advancing it (``read`` on an
    ``aopen_checkpointer`` saver raises LangGraph's ``InvalidStateError``; ``aresume`` runs a
    crashed run on). ``aread`` gives what ``read`` gives from the same store: a paused run
    with its question, an ended one, and ``UnknownThread``."""
    from gated_react import aread

    path = str(tmp_path / "s.sqlite")
    policy = Policy(require_approval={"get_user_billing"})

    async def main() -> list[Any]:
        async with aopen_checkpointer(path) as saver:
            graph = _graph(saver, REFUND_42, policy)
            await arun(graph, "refund?", thread_id="paused")
            await arun(_graph(saver, ["Hello."]), "hi", thread_id="ended")
            with pytest.raises(UnknownThread):
                await aread(graph, "nobody")
            return [await aread(graph, "paused"), await aread(graph, "ended")]

    paused, ended = asyncio.run(main())
    with open_checkpointer(path) as saver:
        graph = _graph(saver, [])
        assert [paused, ended] == [read(graph, "paused"), read(graph, "ended")]
    assert paused["status"] == "paused"
    assert paused["pending"][0]["kind"] == "approval"
    assert ended["stop_reason"] == "success"
