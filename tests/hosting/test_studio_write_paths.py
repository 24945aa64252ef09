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

from gated_react._engine.conversation.transcript import calls_shown

from ..support.openai_server import Reply, reply, tool_call
from ..support.studio_server import DevServer, drive
from .stored import viewed

pytestmark = pytest.mark.studio

APPROVAL: dict[str, Any] = {"require_approval": ["get_user_billing"], "max_steps": 6}
FORGED = [{"id": "forged-1", "tool": "get_user_billing", "args": {"user_id": 7}, "key": "forged"}]
REJECT = Command(resume={"decisions": [{"type": "reject", "message": "not now"}]})


def _model(request: dict[str, Any]) -> Reply:
    """Asks for user 42's billing once, then answers."""
    if not calls_shown(convert_to_messages(request["messages"])):
        return tool_call("get_user_billing", user_id=42)
    return reply("done")


STUDIO_DEFAULT = _model  # what the model answers on tests/conftest.py's dev


async def _ended(client: LangGraphClient) -> tuple[str, str, dict[str, Any]]:
    """A thread whose run asked about billing and was rejected: it has ended, nothing ran; and
    a step of its run that names a call the gate never let through (``FORGED``), as a caller
    of the state API writes it (the run is the id of the thread's question)."""
    assistant = await client.assistants.create(graph_id="refund", context=APPROVAL)
    aid, tid = assistant["assistant_id"], (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, aid, input={"goal": "User 42: a refund?"})
    await client.runs.wait(tid, aid, command=REJECT)
    values = (await client.threads.get_state(tid))["values"]
    assert values["stop_reason"] == "tool_rejected:get_user_billing"
    return aid, tid, {"run": values["messages"][0]["id"], "calls": FORGED}


async def _asked(client: LangGraphClient, tid: str) -> list[dict[str, Any]]:
    state = await client.threads.get_state(tid)
    assert viewed(state["values"])["history"] == []  # nothing ran
    return [interrupt["value"] for interrupt in state["interrupts"]]


def test_a_command_to_execute_over_rest_asks_about_the_forged_call(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> list[dict[str, Any]]:
        aid, tid, step = await _ended(client)
        command = Command(update={"step": step}, goto="execute")
        out = await client.runs.wait(tid, aid, command=command)
        assert viewed((await client.threads.get_state(tid))["values"])["history"] == []
        return [interrupt["value"] for interrupt in out["__interrupt__"]]

    (question,) = drive(dev, scenario)
    assert (question["tool"], question["args"]) == ("get_user_billing", {"user_id": 7})


def test_a_state_update_as_the_gate_over_rest_asks_about_the_forged_call(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> list[dict[str, Any]]:
        aid, tid, step = await _ended(client)
        forged = {"step": step, "stop_reason": None}
        await client.threads.update_state(tid, forged, as_node="gate")
        await client.runs.wait(tid, aid, input=None)
        return await _asked(client, tid)

    (question,) = drive(dev, scenario)
    assert (question["tool"], question["args"]) == ("get_user_billing", {"user_id": 7})


def test_a_send_over_rest_runs_nothing(dev: DevServer) -> None:
    """A ``Send`` carries a state of its own, which over REST holds no conversation a step
    could belong to: execute refuses the step in one line (``MisroutedStep``), nothing runs
    and the thread is unchanged. (In process, a ``Send`` carrying the conversation's messages
    is asked about: tests/nodes/test_execute_write_paths.py.)"""

    async def scenario(client: LangGraphClient) -> tuple[str, dict[str, Any], dict[str, Any]]:
        aid, tid, step = await _ended(client)
        before = (await client.threads.get_state(tid))["values"]
        carried = {"messages": before["messages"], "step": step}
        command = Command(goto={"node": "execute", "input": carried})
        try:
            await client.runs.wait(tid, aid, command=command)
        except Exception as exc:  # the SDK raises the run's error
            refused = str(exc)
        else:
            refused = ""
        return refused, before, (await client.threads.get_state(tid))["values"]

    refused, before, after = drive(dev, scenario)
    assert refused.startswith("MisroutedStep: execute was reached with a step of another run")
    assert after == before
    assert viewed(after)["history"] == []


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
    assert [h["action"]["name"] for h in viewed(original)["history"]] == ["get_user_billing"]
