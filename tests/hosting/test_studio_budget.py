"""Budgets that ask, through ``langgraph dev`` as LangChain's UIs drive it: an assistant whose
context says ``on_budget: "ask"`` (and prices its model in the context form's ``prices``)
pauses when a budget is spent; the thread's interrupt is a ``HITLRequest`` naming the budget;
approve, edit and reject answer it with ``Command(resume={"decisions": [...]})``."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse
from langchain_core.messages import convert_to_messages
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command
from pydantic import TypeAdapter

from gated_react._engine.transcript import calls_shown

from ..support.openai_server import Reply, reply, tool_call
from ..support.studio_server import DevServer, drive

pytestmark = pytest.mark.studio

ASKS: dict[str, Any] = {
    "max_steps": 1,
    "on_budget": "ask",
    "max_cost": 5,
    "prices": {"gpt-4.1-mini": {"input": 1.0, "cached_input": 0.5, "output": 2.0}},
}


def _model(request: dict[str, Any]) -> Reply:
    """One profile lookup, then an answer: the lookup spends the one step."""
    if not calls_shown(convert_to_messages(request["messages"])):
        return tool_call("get_user_profile", user_id=42)
    return reply("Anna, on the pro plan")


STUDIO_DEFAULT = _model  # what the model answers on tests/conftest.py's dev


def _answer(decision: dict[str, Any]) -> Command:
    answer = {"decisions": [decision]}
    TypeAdapter(HITLResponse).validate_python(answer, strict=True)
    return Command(resume=answer)


def _spent(dev: DevServer, decision: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A thread paused on its spent step budget, answered with ``decision``: the question and
    the thread's values after."""

    async def scenario(client: LangGraphClient) -> tuple[dict[str, Any], dict[str, Any]]:
        assistant = await client.assistants.create(graph_id="refund", context=ASKS)
        aid, tid = assistant["assistant_id"], (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, aid, input={"goal": "Who is user 42?"})
        state = await client.threads.get_state(tid)
        (interrupt,) = state["interrupts"]
        question: dict[str, Any] = interrupt["value"]
        await client.runs.wait(tid, aid, command=_answer(decision))
        return question, (await client.threads.get_state(tid))["values"]

    result: tuple[dict[str, Any], dict[str, Any]] = drive(dev, scenario)
    return result


def test_the_question_is_a_hitl_request_naming_the_budget(dev: DevServer) -> None:
    question, final = _spent(dev, {"type": "approve"})
    hitl = {key: question[key] for key in HITLRequest.__annotations__}
    TypeAdapter(HITLRequest).validate_python(hitl, strict=True)
    (request,) = hitl["action_requests"]
    assert request["name"] == "max_steps"
    assert request["args"] == {"budget": "max_steps", "spent": 1, "limit": 1, "proposed": 2}
    assert hitl["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    assert (final["status"], final["stop_reason"]) == ("ok", "success")
    assert final["extensions"][0]["decision"] == "approve"
    assert final["usage"]["cost"] > 0  # priced by the context's prices
    assert final["run_context"]["priced_by"] == "policy"


def test_an_edit_sets_the_limit(dev: DevServer) -> None:
    edit = {"type": "edit", "edited_action": {"name": "max_steps", "args": {"limit": 4}}}
    _, final = _spent(dev, edit)
    assert final["stop_reason"] == "success"
    assert [(e["limit"], e["decision"]) for e in final["extensions"]] == [(4, "edit")]


def test_a_reject_stops_with_the_budgets_reason(dev: DevServer) -> None:
    _, final = _spent(dev, {"type": "reject", "message": "enough"})
    assert final["stop_reason"] == "max_steps"
    assert final["message"].endswith("a human declined: enough")
