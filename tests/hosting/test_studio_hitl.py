"""Approvals through ``langgraph dev``, driven as LangChain's UIs (Agent Chat UI, Agent Inbox)
drive them with ``langgraph-sdk``: a run on the served refund graph pauses, the thread's
interrupt is a ``HITLRequest``, and ``Command(resume={"decisions": [...]})`` approves, edits,
rejects or answers in place of the tool. One server for the module, one thread per case."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse
from langchain_core.messages import convert_to_messages
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command
from pydantic import TypeAdapter

from gated_react._engine.conversation.transcript import calls_shown

from ..support.openai_server import FakeOpenAI, Reply, reply, tool_call
from ..support.reaping import wait_for
from ..support.studio_server import DevServer, drive, serving
from .stored import stored, viewed

pytestmark = pytest.mark.studio

BILLING_NEEDS_A_HUMAN: dict[str, Any] = {"require_approval": ["get_user_billing"], "max_steps": 4}
ASKED = {"user_id": 42}
BILLING_CALL = {"kind": "tool", "name": "get_user_billing", "args": ASKED}


def _named(action: dict[str, Any]) -> dict[str, Any]:
    """The action without the id its call has in ``messages``."""
    return {key: value for key, value in action.items() if key != "id"}


OUR_KEYS = {"kind", "tool", "args", "step", "why", "answers", "error"}
WHY = "policy requires a human to approve every get_user_billing call"
ANNA = {"currency": "USD", "plan": "pro_monthly", "price_usd": 49.0, "days_since_first_payment": 10}
MAX = {"currency": "USD", "plan": "free", "price_usd": 0.0, "days_since_first_payment": 120}


def _model(request: dict[str, Any]) -> Reply:
    """Asks for user 42's billing, then answers with what the tool message said: the final
    answer shows the observation the model was given, whoever produced it. Stateless, so the
    threads never depend on the order the server serves them in."""
    messages = convert_to_messages(request["messages"])
    if not calls_shown(messages):
        return tool_call("get_user_billing", **ASKED)
    seen = [m.content for m in messages if m.type == "tool"]
    return reply(f"observed: {seen[-1]}")


STUDIO_DEFAULT = _model  # what the model answers on tests/conftest.py's dev


def _decision(decision: dict[str, Any]) -> Command:
    """The resume command of one decision, checked to be what LangChain's UIs send."""
    answer = {"decisions": [decision]}
    TypeAdapter(HITLResponse).validate_python(answer, strict=True)
    return Command(resume=answer)


def _edit(name: str, **args: Any) -> Command:
    return _decision({"type": "edit", "edited_action": {"name": name, "args": args}})


async def _paused(client: LangGraphClient) -> tuple[str, str, dict[str, Any]]:
    """A new thread whose run waits at the gate: (assistant id, thread id, its question). The
    run is streamed as Agent Chat UI streams it; the question is the thread's one interrupt,
    the same in the stream and in the thread's state, checked to be a ``HITLRequest``."""
    assistant = await client.assistants.create(graph_id="refund", context=BILLING_NEEDS_A_HUMAN)
    aid, tid = assistant["assistant_id"], (await client.threads.create())["thread_id"]
    goal = {"goal": "User 42: can I get a refund?"}
    stream = client.runs.stream(tid, aid, input=goal, stream_mode="values")
    shown = [part.data async for part in stream if part.event == "values"]
    (streamed,) = shown[-1]["__interrupt__"]
    question = await _question(client, tid)
    assert streamed["value"] == question
    return aid, tid, question


async def _question(client: LangGraphClient, tid: str) -> dict[str, Any]:
    """The thread's one open question, as the UIs read it, about the proposed billing call."""
    state = await client.threads.get_state(tid)
    assert state["next"] == ["gate"], state["values"]
    (interrupt,) = state["interrupts"]
    value: dict[str, Any] = interrupt["value"]
    hitl = {key: value[key] for key in HITLRequest.__annotations__}
    TypeAdapter(HITLRequest).validate_python(hitl, strict=True)
    assert hitl == {
        "action_requests": [{"name": "get_user_billing", "args": ASKED, "description": WHY}],
        "review_configs": [
            {
                "action_name": "get_user_billing",
                "allowed_decisions": ["approve", "edit", "reject", "respond"],
            }
        ],
    }
    assert set(value) >= OUR_KEYS
    assert (value["kind"], value["tool"], value["args"]) == ("approval", "get_user_billing", ASKED)
    return value


async def _resume(client: LangGraphClient, aid: str, tid: str, command: Command) -> Any:
    """Resume as the UIs do, and the thread's values after the run, with the answer and history
    its conversation holds (``viewed``)."""
    await client.runs.wait(tid, aid, command=command)
    values = (await client.threads.get_state(tid))["values"]
    return {**viewed(values, tid), "thread_id": tid}


def _forged(state: dict[str, Any], tool: str, **args: Any) -> dict[str, Any]:
    """The step channel written as if the gate had let ``tool`` through with ``args``: what
    Studio's edit-and-continue (the server's state API) can write, for the paused call."""
    question, proposal = state["values"]["messages"][0], state["values"]["messages"][-1]
    call = {"id": proposal["tool_calls"][0]["id"], "tool": tool, "args": args, "key": "k"}
    return {"step": {"run": question["id"], "calls": [call]}}


def test_approve_runs_the_call_and_the_model_sees_its_result(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> Any:
        aid, tid, question = await _paused(client)
        assert (question["step"], question["error"]) == (1, None)
        return await _resume(client, aid, tid, _decision({"type": "approve"}))

    final = drive(dev, scenario)
    assert (final["status"], final["stop_reason"]) == ("ok", "success")
    (step,) = final["history"]
    assert _named(step["action"]) == BILLING_CALL
    assert step["observation"] == {"billing": ANNA}
    assert final["answer"] == f"observed: {json.dumps({'billing': ANNA})}"


def test_an_approved_call_is_traced_as_run(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> Any:
        aid, tid, _ = await _paused(client)
        return await _resume(client, aid, tid, _decision({"type": "approve"}))

    final = drive(dev, scenario)
    (entry,) = stored(dev, final["thread_id"])["trace"]
    assert "by_human" not in entry  # the tool ran: only a human answer is marked


def test_an_edit_runs_the_edited_arguments(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> Any:
        aid, tid, _ = await _paused(client)
        return await _resume(client, aid, tid, _edit("get_user_billing", user_id=7))

    final = drive(dev, scenario)
    assert (final["status"], final["stop_reason"]) == ("ok", "success")
    (step,) = final["history"]
    assert _named(step["action"]) == {**BILLING_CALL, "args": {"user_id": 7}}
    assert step["observation"] == {"billing": MAX}
    # the model read what ran: its result, after the note that a human replaced its call
    assert final["answer"].startswith("observed: Note: a human reviewer replaced this call")
    assert final["answer"].endswith(f"Result:\n{json.dumps({'billing': MAX})}")


def test_an_edit_of_another_tool_or_off_schema_asks_again(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> tuple[list[str], Any]:
        aid, tid, _ = await _paused(client)
        errors = []
        for edit in (_edit("get_user_profile", user_id=42), _edit("get_user_billing", user_id=0)):
            await client.runs.wait(tid, aid, command=edit)
            errors.append((await _question(client, tid))["error"])
        values = (await client.threads.get_state(tid))["values"]
        assert isinstance(values, dict)
        assert viewed(values)["history"] == []  # nothing ran while it was asked again
        return errors, await _resume(client, aid, tid, _decision({"type": "approve"}))

    (other_tool, off_schema), final = drive(dev, scenario)
    assert "an edit cannot change the tool" in other_tool
    assert "get_user_profile" in other_tool
    assert "the edited arguments were refused" in off_schema
    assert "user_id" in off_schema
    assert final["stop_reason"] == "success"
    assert final["history"][0]["action"]["args"] == ASKED  # the proposal, as finally approved


def test_a_reject_stops_the_thread_with_its_message(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> Any:
        aid, tid, _ = await _paused(client)
        reject = _decision({"type": "reject", "message": "billing data stays private"})
        return await _resume(client, aid, tid, reject)

    final = drive(dev, scenario)
    assert (final["status"], final["stop_reason"]) == ("stopped", "tool_rejected:get_user_billing")
    assert "billing data stays private" in final["message"]
    assert final["history"] == []


def test_a_rejected_call_is_traced_with_its_stop_reason(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> Any:
        aid, tid, _ = await _paused(client)
        reject = _decision({"type": "reject", "message": "billing data stays private"})
        return await _resume(client, aid, tid, reject)

    traced = stored(dev, drive(dev, scenario)["thread_id"])["trace"]
    assert traced[-1]["stop_reason"] == "tool_rejected:get_user_billing"


def test_a_respond_is_the_observation_and_the_tool_never_runs(dev: DevServer) -> None:
    said = "Anna pays USD 49 a month; refund approved by support"

    async def scenario(client: LangGraphClient) -> Any:
        aid, tid, _ = await _paused(client)
        return await _resume(client, aid, tid, _decision({"type": "respond", "message": said}))

    final = drive(dev, scenario)
    assert (final["status"], final["stop_reason"]) == ("ok", "success")
    (step,) = final["history"]
    assert {**step, "action": _named(step["action"])} == {
        "step": 1,
        "action": BILLING_CALL,
        "observation": said,
        "ok": True,
    }
    assert final["answer"] == f"observed: {said}"  # what the model was shown as the result


def test_a_respond_is_traced_as_a_humans_answer(dev: DevServer) -> None:
    said = "Anna pays USD 49 a month; refund approved by support"

    async def scenario(client: LangGraphClient) -> Any:
        aid, tid, _ = await _paused(client)
        return await _resume(client, aid, tid, _decision({"type": "respond", "message": said}))

    record = stored(dev, drive(dev, scenario)["thread_id"])
    (entry,) = record["trace"]
    assert (entry["tool"], entry["ok"], entry["by_human"]) == ("get_user_billing", True, True)
    assert record["usage"]["tool_calls"] == 1
    assert record["usage"]["per_tool"] == {"get_user_billing": 1}


def test_studio_edit_and_continue_cannot_run_a_call_the_policy_does_not_admit(
    dev: DevServer,
) -> None:
    """The server's state API writes the step's calls as if the gate had let them through: the
    call under approval becomes a question from execute (for exactly the edited call), the
    unknown tool stops the run with the gate's reason; neither runs."""

    async def scenario(client: LangGraphClient) -> tuple[Any, Any, Any]:
        aid, tid, _ = await _paused(client)
        forged = _forged(await client.threads.get_state(tid), "get_user_billing", user_id=7)
        await client.threads.update_state(tid, forged, as_node="gate")
        await client.runs.wait(tid, aid, input=None)
        asked = await client.threads.get_state(tid)
        aid2, tid2, _ = await _paused(client)
        forged = _forged(await client.threads.get_state(tid2), "delete_everything")
        await client.threads.update_state(tid2, forged, as_node="gate")
        await client.runs.wait(tid2, aid2, input=None)
        refused = (await client.threads.get_state(tid2))["values"]
        approved = await _resume(client, aid, tid, _decision({"type": "approve"}))
        return asked, refused, approved

    asked, refused, approved = drive(dev, scenario)
    assert asked["next"] == ["execute"]
    assert viewed(asked["values"])["history"] == []
    (interrupt,) = asked["interrupts"]
    assert (interrupt["value"]["tool"], interrupt["value"]["args"]) == (
        "get_user_billing",
        {"user_id": 7},
    )
    assert refused["stop_reason"] == "tool_missing:delete_everything"
    assert approved["stop_reason"] == "success"
    # what the human approved ran: the model read user 7's billing
    assert approved["answer"] == f"observed: {json.dumps({'billing': MAX})}"


STORE_KEY = "studio-store-key-" + "h" * 24


@pytest.fixture(scope="module")
def keyed_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """A second server, its store signed with ``GATED_REACT_STORE_KEY``."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GATED_REACT_STORE_KEY", STORE_KEY)
        with (
            FakeOpenAI(default=_model) as model,
            serving(tmp_path_factory.mktemp("studio-keyed"), model) as server,
        ):
            yield server


def test_with_a_store_key_studio_approves_and_edits_and_refuses_an_edited_row(
    keyed_dev: DevServer,
) -> None:
    """Under a store key the server works as without one: an approval, an edit through its
    state API (signed: the saver wrote it) that execute then asks about; the rows it wrote are
    signed, and one edited in the SQLite file behind its back is refused by its next read."""
    from gated_react import open_checkpointer

    async def scenario(client: LangGraphClient) -> tuple[Any, Any, str]:
        aid, tid, _ = await _paused(client)
        approved = await _resume(client, aid, tid, _decision({"type": "approve"}))
        aid2, tid2, _ = await _paused(client)
        forged = _forged(await client.threads.get_state(tid2), "get_user_billing", user_id=7)
        await client.threads.update_state(tid2, forged, as_node="gate")
        await client.runs.wait(tid2, aid2, input=None)
        asked = await client.threads.get_state(tid2)
        return approved, asked, tid2

    approved, asked, edited = drive(keyed_dev, scenario)
    assert approved["stop_reason"] == "success"
    assert asked["next"] == ["execute"]
    (interrupt,) = asked["interrupts"]
    assert interrupt["value"]["args"] == {"user_id": 7}
    db = str(keyed_dev.workdir / "runs.sqlite")
    with open_checkpointer(db, key=STORE_KEY) as saver:
        raw = saver.inner  # type: ignore[attr-defined]
        latest = raw.get_tuple({"configurable": {"thread_id": edited, "checkpoint_ns": ""}})
        assert latest.metadata["gated_react_tag"]
    from ..support.tamper import forge_metadata

    forge_metadata(db, edited, "source", "loop")

    async def read_again(client: LangGraphClient) -> Any:
        try:
            return await client.threads.get_state(edited)
        except Exception as exc:  # the server answers 500; its log names the refusal
            return exc

    refused = drive(keyed_dev, read_again)
    assert isinstance(refused, Exception), refused
    refusal = "does not match its signature"
    wait_for(lambda: refusal in keyed_dev.log.read_text(errors="replace"), what=refusal)
