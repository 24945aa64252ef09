"""Budgets that ask, through ``langgraph dev`` as LangChain's UIs drive it: an assistant whose
context says ``on_budget: "ask"`` (and prices its model in the context form's ``prices``)
pauses when a budget is spent; the thread's interrupt is a ``HITLRequest`` naming the budget;
approve, edit and reject answer it with ``Command(resume={"decisions": [...]})``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse
from langchain_core.messages import convert_to_messages
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command
from pydantic import TypeAdapter

from gated_react._engine.conversation.transcript import calls_shown

from ..support.cli import invoke
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


Spent = tuple[dict[str, Any], dict[str, Any], str]


def _spent(dev: DevServer, decision: dict[str, Any]) -> Spent:
    """A thread paused on its spent step budget, answered with ``decision``: the question, the
    thread's values after, and its id."""

    async def scenario(client: LangGraphClient) -> Spent:
        assistant = await client.assistants.create(graph_id="refund", context=ASKS)
        aid, tid = assistant["assistant_id"], (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, aid, input={"goal": "Who is user 42?"})
        state = await client.threads.get_state(tid)
        (interrupt,) = state["interrupts"]
        question: dict[str, Any] = interrupt["value"]
        await client.runs.wait(tid, aid, command=_answer(decision))
        return question, (await client.threads.get_state(tid))["values"], str(tid)

    result: Spent = drive(dev, scenario)
    return result


def _record(dev: DevServer, thread_id: str) -> dict[str, Any]:
    """What ``gated-react show --json`` reads of the thread: its result and what it ran under,
    from the run's record in the server's store."""
    out = invoke("show", thread_id, "--db", str(dev.workdir / "runs.sqlite"), "--json")
    assert out.exit_code == 0, out.stderr
    shown: dict[str, Any] = json.loads(out.stdout)
    return shown


def _extended(record: dict[str, Any]) -> list[str]:
    return [entry["extended"] for entry in record["trace"] if entry.get("extended")]


def test_the_question_is_a_hitl_request_naming_the_budget(dev: DevServer) -> None:
    question, final, _ = _spent(dev, {"type": "approve"})
    hitl = {key: question[key] for key in HITLRequest.__annotations__}
    TypeAdapter(HITLRequest).validate_python(hitl, strict=True)
    (request,) = hitl["action_requests"]
    assert request["name"] == "max_steps"
    assert request["args"] == {"budget": "max_steps", "spent": 1, "limit": 1, "proposed": 2}
    assert hitl["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    assert (final["status"], final["stop_reason"]) == ("ok", "success")


def test_the_record_holds_the_extension_and_the_contexts_prices(dev: DevServer) -> None:
    _, _, thread = _spent(dev, {"type": "approve"})
    record = _record(dev, thread)
    assert _extended(record) == ["max_steps 1 -> 2 (approve)"]
    assert record["usage"]["cost"] > 0  # priced by the context's prices
    assert record["run_context"]["priced_by"] == "policy"


def test_an_edit_sets_the_limit(dev: DevServer) -> None:
    edit = {"type": "edit", "edited_action": {"name": "max_steps", "args": {"limit": 4}}}
    _, final, _ = _spent(dev, edit)
    assert final["stop_reason"] == "success"


def test_the_record_holds_the_limit_an_edit_set(dev: DevServer) -> None:
    edit = {"type": "edit", "edited_action": {"name": "max_steps", "args": {"limit": 4}}}
    _, _, thread = _spent(dev, edit)
    assert _extended(_record(dev, thread)) == ["max_steps 1 -> 4 (edit)"]


def test_a_reject_stops_with_the_budgets_reason(dev: DevServer) -> None:
    _, final, _ = _spent(dev, {"type": "reject", "message": "enough"})
    assert final["stop_reason"] == "max_steps"
    assert final["message"].endswith("a human declined: enough")
