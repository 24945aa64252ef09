"""Human approval through LangGraph's interrupt(): approve, reject, edit, and malformed answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from gated_react import Policy, build_graph
from gated_react._engine.authority import approval
from gated_react._engine.authority.approval import (
    ANSWERS,
    Decision,
    ask,
    parse_answer,
    question,
    same_question,
)
from gated_react._engine.execution.call_keys import args_hash
from gated_react.answers import UNUSABLE_ANSWER
from gated_react.policy import APPROVAL_DECISIONS as DECISIONS
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ...support.fakes import Payments
from ...support.helpers import policy
from ...support.reaping import PATIENCE
from ...support.results import invoked


def _paused(replies: list[Any], thread: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    graph = build_graph(
        ScriptedChatModel(replies=replies),
        SUPPORT_TOOLS,
        policy=policy(require_approval=frozenset({"get_user_billing"})),
        checkpointer=InMemorySaver(),
    )
    config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    first = graph.invoke({"goal": "refund?"}, config)
    return graph, config, first


def _resumed(graph: Any, config: Any, answer: Any) -> Any:
    """The run resumed with ``answer``, as ``gated_react.resume`` returns it."""
    return invoked(graph, Command(resume=answer), config)


def _ran_edited(out: Any, args: dict[str, Any]) -> None:
    """A call a human edited: the conversation keeps the model's call, its result says what
    ran instead; the history holds the call as it ran, with what it returned."""
    proposed, result = out["messages"][1:3]
    assert proposed.tool_calls[0]["args"] == {"user_id": 42}
    assert f"{json.dumps(args)} instead of the arguments in your call" in result.text
    assert out["history"][0]["action"]["args"] == args


def test_the_run_pauses_with_the_question_and_continues_when_approved() -> None:
    graph, config, first = _paused([call("get_user_billing", user_id=42), "USD 49"], "approve")
    question = first["__interrupt__"][0].value
    assert question["tool"] == "get_user_billing"
    assert question["args"] == {"user_id": 42}
    assert question["step"] == 1
    assert question["kind"] == "approval"
    assert question["why"] == "policy requires a human to approve every get_user_billing call"
    assert question["answers"] == ANSWERS
    assert question["error"] is None
    assert first.get("status") is None
    out = _resumed(graph, config, {"approved": True})
    assert out["stop_reason"] == "success"
    assert out["history"][0]["observation"]["billing"]["price_usd"] == 49.0


def test_rejection_stops_with_the_reason() -> None:
    graph, config, _ = _paused([call("get_user_billing", user_id=42)], "reject")
    out = _resumed(graph, config, {"approved": False, "reason": "not today"})
    assert out["stop_reason"] == "tool_rejected:get_user_billing"
    assert "not today" in out["message"]
    assert out["trace"][-1]["stop_reason"] == "tool_rejected:get_user_billing"


def test_edited_args_run_instead() -> None:
    graph, config, _ = _paused([call("get_user_billing", user_id=42), "done"], "edit")
    out = _resumed(graph, config, {"approved": True, "args": {"user_id": 7}})
    _ran_edited(out, {"user_id": 7})
    assert out["history"][0]["observation"]["billing"]["plan"] == "free"  # user 7's, not 42's
    assert out["trace"][0]["args_hash"] == args_hash({"user_id": 7})


def test_edited_args_are_gated_again() -> None:
    replies = [call("get_user_billing", user_id=7), call("get_user_billing", user_id=42)]
    graph, config, _ = _paused(replies, "edit-loop")
    graph.invoke(Command(resume={"approved": True}), config)
    out = graph.invoke(Command(resume={"approved": True, "args": {"user_id": 7}}), config)
    assert out["stop_reason"] == "loop_detected"


def test_edited_args_that_miss_the_tool_schema_ask_again_with_the_reason() -> None:
    graph, config, _ = _paused([call("get_user_billing", user_id=42), "done"], "edit-bad")
    again = graph.invoke(Command(resume={"approved": True, "args": {"user_id": "x"}}), config)
    error = again["__interrupt__"][0].value["error"]
    assert error.startswith(
        "the edited arguments were refused: invalid arguments for get_user_billing: "
    )
    assert "user_id" in error
    out = _resumed(graph, config, {"approved": True, "args": {"user_id": 7}})
    assert out["stop_reason"] == "success"
    _ran_edited(out, {"user_id": 7})


def test_a_malformed_answer_asks_again() -> None:
    graph, config, _ = _paused([call("get_user_billing", user_id=42), "fine"], "malformed")
    again = graph.invoke(Command(resume="yes please"), config)
    question = again["__interrupt__"][0].value
    assert question["error"] == (
        "your last answer was not understood: expected an object like {'approved': True}, got str"
    )
    assert question["answers"] == ANSWERS
    assert question["tool"] == "get_user_billing"
    out = graph.invoke(Command(resume={"approved": True}), config)
    assert out["stop_reason"] == "success"


OBJECT = "expected an object like {'approved': True}, got "
UNKNOWN = "unknown keys ['sudo']; allowed: approved, args, reason"
ARGS = "'args' must be an object and goes only with approved=true"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, OBJECT + "NoneType"),
        ("yes", OBJECT + "str"),
        ({"approved": "yes"}, "'approved' must be true or false"),
        ({"reason": "fine"}, "'approved' must be true or false"),
        ({"approved": True, "args": [1]}, ARGS),
        ({"approved": False, "args": {}}, ARGS),
        ({"approved": True, "sudo": True}, UNKNOWN),
        ({"approved": False, "reason": 5}, "'reason' must be a string"),
        (
            {"approved": True, "args": {"user_id": 10**30}},
            "an integer outside the 64-bit range (100 bits; from -2**63 to 2**64-1)",
        ),
        (
            {UNUSABLE_ANSWER: "no store can hold it (int too big)"},
            "no store can hold it (int too big)",
        ),
        (
            {UNUSABLE_ANSWER: "x", "approved": True},
            "unknown keys ['unusable_answer']; allowed: approved, args, reason",
        ),
    ],
)
def test_parse_answer_rejects_malformed_values(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_answer(value)


def test_unknown_keys_are_named_sorted_and_at_most_five() -> None:
    value = {"approved": True, **{f"k{i}": 1 for i in range(7)}}
    shown = "unknown keys ['k0', 'k1', 'k2', 'k3', 'k4']; allowed: approved, args, reason"
    with pytest.raises(ValueError, match=f"^{re.escape(shown)}$"):
        parse_answer(value)


def test_parse_answer_keeps_args_and_trims_the_reason() -> None:
    assert parse_answer({"approved": True}) == Decision(approved=True, args=None, reason="")
    edited = parse_answer({"approved": True, "args": {"user_id": 7}, "reason": " typo "})
    assert edited == Decision(approved=True, args={"user_id": 7}, reason="typo")
    assert parse_answer({"approved": False, "args": None}) == Decision(approved=False)


def test_the_example_answers_shown_with_the_question_are_accepted() -> None:
    assert ANSWERS == {
        "approve": {"approved": True},
        "approve_with_edits": {"approved": True, "args": {"...": "..."}},
        "reject": {"approved": False, "reason": "why"},
        "respond": {
            "decisions": [{"type": "respond", "message": "the answer, in place of the tool"}]
        },
    }
    assert parse_answer(ANSWERS["respond"]) == Decision(
        approved=False, response="the answer, in place of the tool"
    )
    assert parse_answer(ANSWERS["approve"]) == Decision(approved=True)
    edits = parse_answer(ANSWERS["approve_with_edits"])
    assert edits == Decision(approved=True, args={"...": "..."})
    assert parse_answer(ANSWERS["reject"]) == Decision(approved=False, reason="why")


def _ask(
    monkeypatch: pytest.MonkeyPatch, answers: list[Any], check: Any = None
) -> tuple[Decision, list[dict[str, Any]]]:
    """``ask`` with each interrupt answered from ``answers``; the decision and the questions."""
    questions: list[dict[str, Any]] = []

    def ask_human(value: dict[str, Any], same: Any) -> Any:
        assert same(dict(value), value)  # a question is the one it was asked as
        assert value.pop("asked_as") == []  # ids need a graph (tests/test_runs.py has them)
        questions.append(value)
        return answers[len(questions) - 1]

    monkeypatch.setattr(approval, "ask_human", ask_human)
    return ask(QUESTION, check), questions


QUESTION = question("approval", "t", {"n": 1}, 3, "policy says so", allowed=DECISIONS)


def test_ask_shows_the_examples_and_returns_the_first_valid_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decision, questions = _ask(monkeypatch, [{"approved": False, "reason": " no "}])
    assert decision == Decision(approved=False, reason="no")
    assert questions == [{**QUESTION, "answers": ANSWERS, "error": None}]


def test_ask_asks_again_until_edits_pass_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def check(args: dict[str, Any]) -> str | None:
        return None if args == {"n": 2} else f"bad n {args['n']}"

    edits = [{"approved": True, "args": {"n": n}} for n in (1, 2)]
    decision, questions = _ask(monkeypatch, ["nope", *edits], check)
    assert decision == Decision(approved=True, args={"n": 2})
    assert [q["error"] for q in questions] == [
        None,
        "your last answer was not understood: expected an object like {'approved': True}, got str",
        "the edited arguments were refused: bad n 1",
    ]


def test_ask_checks_only_edited_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    def check(args: dict[str, Any]) -> str:
        return "always refused"

    decision, questions = _ask(monkeypatch, [{"approved": True}], check)
    assert decision == Decision(approved=True)
    assert len(questions) == 1
    unchecked, _ = _ask(monkeypatch, [{"approved": True, "args": {"n": 1}}])
    assert unchecked.args == {"n": 1}


def test_an_answer_in_place_of_the_tool_is_an_observation_like_any_other() -> None:
    """Both places a human may answer for a tool (the gate, and a call whose outcome a crash
    left unknown) make the outcome here."""
    shown = approval.answered_text("a" * 5000 + " sk-secret-123", 100, ("sk-secret-123",))
    assert shown == "a" * 100 + " ...[cut: 5004 chars, first 100 shown]"
    assert approval.answered_text("paid sk-secret-123", 100, ("sk-secret-123",)) == "paid ***"


def test_an_answer_decides_only_the_question_it_was_given_for() -> None:
    """Asked again, a question is the same one (its error and ids change); another call, other
    arguments, another step or another kind is another question."""
    again = {**QUESTION, "answers": ANSWERS, "error": "not understood", "asked_as": ["x"]}
    assert same_question(QUESTION, again)
    assert same_question(json.loads(json.dumps(QUESTION)), QUESTION)  # as a store revives it
    for other in (
        question("approval", "t", {"n": 2}, 3, "policy says so", allowed=DECISIONS),
        question("approval", "u", {"n": 1}, 3, "policy says so", allowed=DECISIONS),
        question("approval", "t", {"n": 1}, 4, "policy says so", allowed=DECISIONS),
        question("outcome_unknown", "t", {"n": 1}, 3, "policy says so", allowed=DECISIONS),
    ):
        assert not same_question(other, QUESTION)
    assert not same_question(None, QUESTION)


def test_an_approval_sent_again_by_its_id_is_not_taken_for_the_next_question() -> None:
    """What the Studio guide tells a server's client: answer by the interrupt's id. The run
    that took the approval is cancelled while the call runs; the next invocation asks whether
    the call, which may have run, should run again. The first approval sent again under its
    id answers nothing there (sent bare, it would be taken for it, and the call would run a
    second time): the question still waits, and the call ran once."""
    payments = Payments()
    started, release = payments.started, payments.release
    model = ScriptedChatModel(replies=[call("pay", order="a"), "Paid."])
    graph = build_graph(model, [payments.tool], policy=Policy(require_approval={"pay"}),
                        checkpointer=InMemorySaver())  # fmt: skip
    config: Any = {"configurable": {"thread_id": "again"}}

    async def main() -> Any:
        await graph.ainvoke({"goal": "Pay a."}, config)
        (first,) = (await graph.aget_state(config)).interrupts
        answer = Command(resume={first.id: {"approved": True}})
        running = asyncio.create_task(graph.ainvoke(answer, config))
        assert await asyncio.to_thread(started.wait, PATIENCE)
        running.cancel()  # the server cancels the run mid-call
        with contextlib.suppress(asyncio.CancelledError):
            await running
        release.set()
        await graph.ainvoke(None, config)  # asks whether the call should run again
        await graph.ainvoke(answer, config)  # the first approval, sent again
        return await graph.aget_state(config)

    state = asyncio.run(main())
    assert payments.made == ["a"]
    (waiting,) = state.interrupts
    assert waiting.value["kind"] == "outcome_unknown"
