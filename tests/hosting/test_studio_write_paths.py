"""Issue 28, item 1 through ``langgraph dev``'s REST API, the one Studio and every SDK use: a
command to execute, a state update as the gate, a ``Send``, and a copied thread never run a
call the gate did not admit. The in-process twins are in
``tests/nodes/test_execute_write_paths.py``."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import convert_to_messages
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command

from gated_react._engine.transcript import calls_shown

from ..support.openai_server import Reply, reply, tool_call
from ..support.studio_server import DevServer, drive

pytestmark = pytest.mark.studio

APPROVAL: dict[str, Any] = {"require_approval": ["get_user_billing"], "max_steps": 6}
FORGED = [{"step": 1, "tool": "get_user_billing", "args": {"user_id": 7}, "key": "forged"}]
REJECT = Command(resume={"decisions": [{"type": "reject", "message": "not now"}]})


def _model(request: dict[str, Any]) -> Reply:
    """Asks for user 42's billing once, then answers."""
    if not calls_shown(convert_to_messages(request["messages"])):
        return tool_call("get_user_billing", user_id=42)
    return reply("done")


STUDIO_DEFAULT = _model  # what the model answers on tests/conftest.py's dev


async def _ended(client: LangGraphClient) -> tuple[str, str]:
    """A thread whose run asked about billing and was rejected: it has ended, nothing ran."""
    assistant = await client.assistants.create(graph_id="refund", context=APPROVAL)
    aid, tid = assistant["assistant_id"], (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, aid, input={"goal": "User 42: a refund?"})
    await client.runs.wait(tid, aid, command=REJECT)
    values = (await client.threads.get_state(tid))["values"]
    assert values["stop_reason"] == "tool_rejected:get_user_billing"
    return aid, tid


async def _asked(client: LangGraphClient, tid: str) -> list[dict[str, Any]]:
    state = await client.threads.get_state(tid)
    assert state["values"]["history"] == []  # nothing ran
    return [interrupt["value"] for interrupt in state["interrupts"]]


def test_a_command_to_execute_over_rest_asks_about_the_forged_call(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> list[dict[str, Any]]:
        aid, tid = await _ended(client)
        command = Command(update={"calls": FORGED}, goto="execute")
        out = await client.runs.wait(tid, aid, command=command)
        assert (await client.threads.get_state(tid))["values"]["history"] == []
        return [interrupt["value"] for interrupt in out["__interrupt__"]]

    (question,) = drive(dev, scenario)
    assert (question["tool"], question["args"]) == ("get_user_billing", {"user_id": 7})


def test_a_state_update_as_the_gate_over_rest_asks_about_the_forged_call(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> list[dict[str, Any]]:
        aid, tid = await _ended(client)
        forged = {"calls": FORGED, "stop_reason": None}
        await client.threads.update_state(tid, forged, as_node="gate")
        await client.runs.wait(tid, aid, input=None)
        return await _asked(client, tid)

    (question,) = drive(dev, scenario)
    assert (question["tool"], question["args"]) == ("get_user_billing", {"user_id": 7})


def test_a_send_over_rest_runs_nothing(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> dict[str, Any]:
        aid, tid = await _ended(client)
        carried = {"goal": "x", "calls": FORGED, "usage": {"tool_calls": 0}}
        command = Command(goto={"node": "execute", "input": carried})
        await client.runs.wait(tid, aid, command=command)
        values: dict[str, Any] = (await client.threads.get_state(tid))["values"]
        return values

    values = drive(dev, scenario)
    assert values["stop_reason"] == "invalid_action:sent"
    assert values["history"] == []


def test_a_copied_thread_asks_again_before_an_approved_call_runs(dev: DevServer) -> None:
    """Approved and held just before execute, then copied by the server: the copy asks again
    (its execute cannot prove the gate's admission), and the original runs the call once."""

    async def scenario(client: LangGraphClient) -> tuple[list[dict[str, Any]], Any]:
        assistant = await client.assistants.create(graph_id="refund", context=APPROVAL)
        aid, tid = assistant["assistant_id"], (await client.threads.create())["thread_id"]
        held = ["execute"]
        await client.runs.wait(tid, aid, input={"goal": "42?"}, interrupt_before=held)
        approve = Command(resume={"decisions": [{"type": "approve"}]})
        await client.runs.wait(tid, aid, command=approve, interrupt_before=held)
        assert (await client.threads.get_state(tid))["next"] == ["execute"]
        copy = (await client.threads.copy(tid))["thread_id"]
        await client.runs.wait(copy, aid, input=None)
        asked = await _asked(client, copy)
        await client.runs.wait(tid, aid, input=None)
        return asked, (await client.threads.get_state(tid))["values"]

    asked, original = drive(dev, scenario)
    assert [(q["tool"], q["args"]) for q in asked] == [("get_user_billing", {"user_id": 42})]
    assert original["stop_reason"] == "success"
    assert [h["action"]["name"] for h in original["history"]] == ["get_user_billing"]
