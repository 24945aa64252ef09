"""A dev server killed with SIGKILL mid-run and while paused, restarted on the same store: no
run is lost and no step repeats (the durable checkpointer from ``langgraph.json`` at work)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import convert_to_messages
from langgraph_sdk.client import LangGraphClient

from gated_react._engine.conversation.transcript import calls_shown

from ..support.openai_server import Delay, FakeOpenAI, reply, tool_call
from ..support.studio_server import dev_server, drive
from .stored import stored, viewed

pytestmark = pytest.mark.studio

BILLING_NEEDS_A_HUMAN = {"require_approval": ["get_user_billing"], "max_steps": 6}
PAUSED_GOAL = "User 42: refund amount?"
MIDRUN_GOAL = "Who is user 42?"


def _respond(request: dict[str, Any], first_seen: set[str]) -> Any:
    """A model that answers from the prompt, not from a script order: the server may replay a
    request after a restart. Holds the first 'second decision' of the mid-run thread for 60 s,
    long enough for the test to kill the server while the call is in flight."""
    messages = convert_to_messages(request["messages"])
    done = calls_shown(messages)
    if messages[0].content == PAUSED_GOAL:  # the goal's turn opens the request
        return tool_call("get_user_billing", user_id=42) if not done else reply("USD 49")
    if not done:
        return tool_call("get_user_profile", user_id=42)
    if "held" not in first_seen:
        first_seen.add("held")
        return Delay(60, reply("too late"))
    return reply("Anna")


async def _reattach(client: LangGraphClient, assistant: dict[str, Any], tids: list[str]) -> None:
    """The dev server keeps its list of assistants and threads in .langgraph_api/, flushed every
    10 s; their runs live in our store. Re-register the ids (a no-op when the list survived)."""
    await client.assistants.create(
        graph_id="refund",
        assistant_id=assistant["assistant_id"],
        context=assistant["context"],
        if_exists="do_nothing",
    )
    for tid in tids:
        await client.threads.create(thread_id=tid, graph_id="refund", if_exists="do_nothing")


def test_a_killed_server_loses_no_run(tmp_path: Path) -> None:
    seen: set[str] = set()
    with FakeOpenAI(default=lambda request: _respond(request, seen)) as model:
        server = dev_server(tmp_path, model)
        try:
            server.start()

            async def before(client: LangGraphClient) -> tuple[dict[str, Any], str, str]:
                assistant = await client.assistants.create(
                    graph_id="refund", context=BILLING_NEEDS_A_HUMAN
                )
                aid = assistant["assistant_id"]
                paused = (await client.threads.create())["thread_id"]
                await client.runs.wait(paused, aid, input={"goal": PAUSED_GOAL})
                midrun = (await client.threads.create())["thread_id"]
                # "sync": each checkpoint is on disk before the next node starts, so the kill
                # point is exact (the server's default, "async", may redo a node or two).
                await client.runs.create(
                    midrun, aid, input={"goal": MIDRUN_GOAL}, durability="sync"
                )
                for _ in range(1200):  # until its second model call is in flight (60 s at most)
                    if "held" in seen:
                        break
                    await asyncio.sleep(0.05)
                assert "held" in seen, server.tail()
                return assistant, paused, midrun

            assistant, paused, midrun = drive(server, before)
            server.kill()
            server.start()

            async def after(client: LangGraphClient) -> None:
                await _reattach(client, assistant, [paused, midrun])
                aid = assistant["assistant_id"]

                waiting = await client.threads.get_state(paused)
                assert waiting["next"] == ["gate"]
                assert waiting["interrupts"][0]["value"]["tool"] == "get_user_billing"
                await client.runs.wait(paused, aid, command={"resume": {"approved": True}})
                final = viewed((await client.threads.get_state(paused))["values"])
                assert (final["stop_reason"], final["answer"]) == ("success", "USD 49")

                runs = await client.runs.list(midrun)
                active = [r for r in runs if r["status"] in ("pending", "running")]
                if active:  # the server's own retry of a run its list had recorded as running
                    await client.runs.join(midrun, active[0]["run_id"])
                else:
                    cut = await client.threads.get_state(midrun)
                    assert cut["next"] == ["decide"]  # saved before the killed call began
                    await client.runs.wait(midrun, aid, input=None)
                final = viewed((await client.threads.get_state(midrun))["values"])
                assert (final["stop_reason"], final["answer"]) == ("success", "Anna")
                assert [step["action"]["name"] for step in final["history"]] == ["get_user_profile"]

            drive(server, after)
            # the killed call counts (it may have been paid), whichever way the run went on
            assert stored(server, midrun)["usage"]["steps"] == 3
        finally:
            server.cleanup()
    assert len(server.startup_seconds) == 2
    assert not (tmp_path / ".langgraph_api").exists()
