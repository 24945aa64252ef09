"""Approvals in LangChain's human-in-the-loop format, end to end through ``run`` and ``resume``:
the question validates against the middleware's own types, and every decision type does what
LangChain's UIs promise (approve, edit, reject, respond), beside our older answer form."""

from __future__ import annotations

from typing import Any, NotRequired

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.agents.middleware.human_in_the_loop import (
    ActionRequest,
    HITLRequest,
    HITLResponse,
    ReviewConfig,
)
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool as lc_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import TypeAdapter

from gated_react import Policy, build_graph, resume, run
from gated_react._engine.execution.call_keys import args_hash
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

BILLING = call("get_user_billing", user_id=42)


def _graph(replies: list[Any], **policy: Any) -> Any:
    approval = Policy(require_approval=frozenset({"get_user_billing"}), **policy)
    model = ScriptedChatModel(replies=replies)
    return build_graph(model, SUPPORT_TOOLS, policy=approval, checkpointer=InMemorySaver())


def _paused(replies: list[Any], **policy: Any) -> tuple[Any, dict[str, Any]]:
    graph = _graph(replies, **policy)
    out = run(graph, "refund?", thread_id="t")
    assert out["status"] == "paused"
    return graph, out["pending"][0]


def test_the_question_is_a_langchain_hitl_request_beside_our_keys() -> None:
    _, question = _paused([BILLING])
    hitl = {key: question[key] for key in HITLRequest.__annotations__}
    TypeAdapter(HITLRequest).validate_python(hitl, strict=True)
    (request,) = question["action_requests"]
    assert set(request) <= set(ActionRequest.__annotations__)
    assert request == {
        "name": "get_user_billing",
        "args": {"user_id": 42},
        "description": "policy requires a human to approve every get_user_billing call",
    }
    (review,) = question["review_configs"]
    assert set(review) <= set(ReviewConfig.__annotations__)
    assert review["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    assert {"kind", "tool", "args", "step", "id", "error"} <= set(question)


def _answer(decision: dict[str, Any]) -> dict[str, Any]:
    answer = {"decisions": [decision]}
    TypeAdapter(HITLResponse).validate_python(answer)  # what LangChain's UIs send
    return answer


def test_approve_runs_the_call() -> None:
    graph, question = _paused([BILLING, "USD 49"])
    out = resume(graph, "t", _answer({"type": "approve"}), question=question["id"])
    assert out["stop_reason"] == "success"
    assert out["history"][0]["observation"]["billing"]["price_usd"] == 49.0


@pytest.mark.parametrize(
    "decision",
    [
        {"type": "edit", "edited_action": {"name": "get_user_billing", "args": {"user_id": 7}}},
        {"type": "respond", "message": "USD 0"},
    ],
)
def test_a_decision_the_policy_does_not_list_is_asked_again(decision: dict[str, Any]) -> None:
    only = {"get_user_billing": ("approve", "reject")}
    graph, question = _paused([BILLING, "USD 49"], approval_decisions=only)
    assert question["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
    again = resume(graph, "t", _answer(decision))
    assert again["status"] == "paused"
    assert "not allowed here; allowed: approve, reject" in again["pending"][0]["error"]
    out = resume(graph, "t", _answer({"type": "approve"}))
    assert out["stop_reason"] == "success"
    assert out["history"][0]["action"]["args"] == {"user_id": 42}


def test_edit_runs_the_edited_arguments_and_may_not_change_the_tool() -> None:
    graph, _ = _paused([BILLING, "no refund for 7"])
    other = {"type": "edit", "edited_action": {"name": "get_user_profile", "args": {"user_id": 7}}}
    again = resume(graph, "t", _answer(other))
    assert again["status"] == "paused"
    assert "cannot change the tool" in again["pending"][0]["error"]
    edit = {"type": "edit", "edited_action": {"name": "get_user_billing", "args": {"user_id": 7}}}
    out = resume(graph, "t", _answer(edit))
    assert out["stop_reason"] == "success"
    proposed, result = out["messages"][1:3]
    assert proposed.tool_calls[0]["args"] == {"user_id": 42}  # the model's call, as it made it
    assert 'get_user_billing was called with {"user_id": 7}' in result.text
    (entry,) = out["history"]
    assert entry["action"]["args"] == {"user_id": 7}  # the call as it ran
    assert entry["observation"]["billing"]["plan"] == "free"
    (traced,) = out["trace"]
    assert traced["args_hash"] == args_hash({"user_id": 7})  # what ran, under its permit


def test_reject_stops_the_run_with_the_message() -> None:
    graph, _ = _paused([BILLING])
    out = resume(graph, "t", _answer({"type": "reject", "message": "not today"}))
    assert out["stop_reason"] == "tool_rejected:get_user_billing"
    assert "not today" in out["message"]


def test_respond_answers_in_place_of_the_tool_and_counts_as_a_call() -> None:
    graph, _ = _paused([BILLING, BILLING, "USD 49"], repeat_reminders=1)
    message = "Billing is down; the customer paid USD 49 ten days ago."
    out = resume(graph, "t", _answer({"type": "respond", "message": message}))
    first, second = out["history"][:2]
    assert (first["observation"], first["ok"]) == (message, True)
    assert second["observation"].startswith("You already called")  # its loop key was kept
    assert out["trace"][0]["by_human"] is True
    assert out["usage"]["per_tool"] == {"get_user_billing": 2}
    assert out["stop_reason"] == "success"


def test_a_human_answer_in_place_of_the_tool_is_traced_as_a_result() -> None:
    graph, _ = _paused([BILLING, "USD 49"])
    out = resume(graph, "t", _answer({"type": "respond", "message": "USD 49"}))
    assert (out["trace"][0]["by_human"], out["trace"][0]["ok"]) == (True, True)
    assert out["trace"][0]["ok"] == out["history"][0]["ok"]


def test_a_long_respond_message_is_cut_like_an_observation() -> None:
    graph, _ = _paused([BILLING, "USD 49"], max_observation_chars=500)
    out = resume(graph, "t", _answer({"type": "respond", "message": "m" * 2_000_000}))
    assert out["stop_reason"] == "success"
    assert out["history"][0]["observation"] == (
        "m" * 500 + " ...[cut: 2000000 chars, first 500 shown]"
    )


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"decisions": []}, "one decision"),
        ({"decisions": [{"type": "maybe"}]}, "must be one of"),
        ({"decisions": [{"type": "respond", "message": " "}]}, "non-blank"),
        ({"decisions": [{"type": "edit", "edited_action": {"name": "x"}}]}, "edited_action"),
    ],
)
def test_a_malformed_decision_asks_again(answer: dict[str, Any], error: str) -> None:
    graph, _ = _paused([BILLING])
    again = resume(graph, "t", answer)
    assert again["status"] == "paused"
    assert error in again["pending"][0]["error"]


class _Fake(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@lc_tool
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


@pytest.mark.parametrize(
    ("decision", "said"),
    [({"type": "approve"}, "paid 5"), ({"type": "reject", "message": "no"}, "no")],
)
def test_a_per_call_review_asks_and_takes_answers_as_create_agents_does(
    decision: dict[str, Any], said: str
) -> None:
    """``HumanInTheLoopMiddleware(interrupt_mode="per_call")``: the question is LangChain's
    ``ToolApprovalRequest`` too, answered by its id with one bare decision."""
    seen = []
    for make in (create_agent, build_graph):
        pays = AIMessage("", tool_calls=[{"name": "pay", "args": {"amount": 5}, "id": "c1"}])
        model = _Fake(messages=iter([pays, AIMessage("Done.")]))
        review = HumanInTheLoopMiddleware(interrupt_on={"pay": True}, interrupt_mode="per_call")
        agent = make(model, [pay], middleware=[review], checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "t"}}
        out = agent.invoke({"messages": [{"role": "user", "content": "pay 5"}]}, config)
        (asked,) = out["__interrupt__"]
        shown = {k: asked.value[k] for k in ("type", "tool_call_id", "name", "args", "description")}
        out = agent.invoke(Command(resume={asked.id: decision}), config)
        seen.append((shown, [m.text for m in out["messages"]]))
    assert seen[0] == seen[1]
    assert said in seen[0][1][2]


@pytest.mark.parametrize("notice", ["default", "EDITED BY REVIEWER.", None])
def test_an_edited_calls_result_opens_with_the_middlewares_edit_notice(notice: Any) -> None:
    """Under ``HumanInTheLoopMiddleware`` the result of a call a reviewer edited reads as
    under ``create_agent``: its ``edit_notice`` (default, given, or none) and what ran."""
    given = {} if notice == "default" else {"edit_notice": notice}
    edit = {"type": "edit", "edited_action": {"name": "pay", "args": {"amount": 2}}}
    seen = []
    for make in (create_agent, build_graph):
        pays = AIMessage("", tool_calls=[{"name": "pay", "args": {"amount": 5}, "id": "c1"}])
        model = _Fake(messages=iter([pays, AIMessage("Done.")]))
        review = HumanInTheLoopMiddleware(interrupt_on={"pay": True}, **given)
        agent = make(model, [pay], middleware=[review], checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "t"}}
        agent.invoke({"messages": [{"role": "user", "content": "pay 5"}]}, config)
        out = agent.invoke(Command(resume={"decisions": [edit]}), config)
        seen.append(out["messages"][2].text)
    assert seen[0] == seen[1]
    assert seen[0].endswith("paid 2")


class _Reviewed(AgentState[Any]):
    needs_review: NotRequired[bool]


def _reviewed(**config: Any) -> Any:
    pays = AIMessage("", tool_calls=[{"name": "pay", "args": {"amount": 5}, "id": "c1"}])
    review = HumanInTheLoopMiddleware(
        interrupt_on={"pay": {"allowed_decisions": ["approve", "reject"], **config}}
    )
    model = _Fake(messages=iter([pays, AIMessage("Done.")]))
    return build_graph(model, [pay], middleware=[review], state_schema=_Reviewed,
                       checkpointer=InMemorySaver())  # fmt: skip


PAID: list[int] = []


@lc_tool("pay")
def counted_pay(amount: int) -> str:
    """Pay an amount."""
    PAID.append(amount)
    return f"paid {amount}"


@pytest.mark.parametrize("how", ["answer beside", "state edit"])
def test_a_when_that_changes_its_mind_never_skips_the_humans_answer(how: str) -> None:
    """``when`` asked a human; run again to take the answer, it says no human is needed (a
    state field a client sets beside the answer, a clock): the answer is taken all the same,
    and a rejection runs nothing."""
    PAID.clear()
    pays = AIMessage("", tool_calls=[{"name": "pay", "args": {"amount": 5}, "id": "c1"}])
    review = HumanInTheLoopMiddleware(interrupt_on={"pay": {
        "allowed_decisions": ["approve", "reject"],
        "when": lambda request: request.state.get("needs_review", True),
    }})  # fmt: skip
    graph = build_graph(_Fake(messages=iter([pays, AIMessage("Done.")])), [counted_pay],
                        middleware=[review], state_schema=_Reviewed,
                        checkpointer=InMemorySaver())  # fmt: skip
    config: Any = {"configurable": {"thread_id": "t"}}
    asked = graph.invoke({"messages": [{"role": "user", "content": "pay"}],
                          "needs_review": True}, config)  # fmt: skip
    assert asked["__interrupt__"]
    if how == "answer beside":
        reject = {"type": "reject", "message": "no"}
        out = graph.invoke(Command(resume=reject, update={"needs_review": False}), config)
        assert "no" in out["messages"][2].text
    else:
        graph.update_state(config, {"needs_review": False})
        out = graph.invoke(None, config)
        assert out["__interrupt__"]  # asked again: no answer came
    assert PAID == []


def test_a_description_that_changes_each_time_still_takes_its_answer() -> None:
    """A review whose ``description`` says when it asks: run again to take the answer, its
    question reads otherwise, and is still the question the human answered."""
    import itertools

    counter = itertools.count()
    graph = _reviewed(description=lambda *_: f"asked at {next(counter)}")
    config: Any = {"configurable": {"thread_id": "t"}}
    assert graph.invoke({"messages": [{"role": "user", "content": "pay"}]}, config)["__interrupt__"]
    out = graph.invoke(Command(resume={"type": "approve"}), config)
    assert out["messages"][2].text == "paid 5"


@pytest.mark.parametrize("hook", ["when", "description"])
def test_a_review_hook_that_raises_ends_the_run_with_a_middleware_error(hook: str) -> None:
    def broken(*_: Any) -> Any:
        raise ZeroDivisionError("division by zero")

    out = _reviewed(**{hook: broken}).invoke(
        {"messages": [{"role": "user", "content": "pay"}]}, {"configurable": {"thread_id": "t"}}
    )
    assert out["stop_reason"] == "middleware_error:HumanInTheLoopMiddleware"
    assert f"{hook} raised ZeroDivisionError: division by zero" in out["message"]
