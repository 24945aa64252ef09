"""Replays through a real ``langgraph dev``'s REST API (what Studio and every SDK use) do not
pay again unasked (found by an outside tester: a resume sent to an old checkpoint and a fork
continued each ran the payment a second time). The in-process twins are in
``tests/nodes/test_execute_branches.py``.

The server serves ``agent`` below (a user's own graph with a tool that is not idempotent, as
the Studio guide's "Serving your own graph" shows) with the package's checkpointer; ``pay``
appends a line to the file ``ATTACK_R6_LEDGER`` names, so the test counts real payments made
in the server's process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command

from gated_react import build_graph, naming_inputs
from gated_react.testing import ScriptedChatModel, call

from ..support.helpers import as_subgraph
from ..support.studio_server import DevServer, drive

pytestmark = pytest.mark.studio

REPO = Path(__file__).resolve().parents[2]


@tool
def pay(item: str) -> str:
    """Pays (not idempotent)."""
    with open(os.environ["ATTACK_R6_LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(f"pay {item}\n")
    return f"paid {item}"


def _model(messages: list[BaseMessage]) -> Any:
    """Pays once, then answers."""
    return "done" if any(isinstance(m, ToolMessage) for m in messages) else call("pay", item="a")


agent = build_graph(ScriptedChatModel(replies=[_model], cycle=True), [pay], name="payments")
desk = naming_inputs(
    as_subgraph(build_graph(ScriptedChatModel(replies=[_model], cycle=True), [pay]), None)
)
"""A parent graph of the user's own running the agent as its node, served as ``naming_inputs``
makes it."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    workdir = tmp_path_factory.mktemp("replays")
    config = workdir / "langgraph.json"
    graphs = {
        "payments": {"path": "tests.hosting.test_studio_replays:agent"},
        "desk": {"path": "tests.hosting.test_studio_replays:desk"},
    }
    checkpointer = {"backend": "custom", "path": "gated_react.hosting.studio.checkpointer"}
    config.write_text(
        json.dumps({"dependencies": [str(REPO)], "graphs": graphs, "checkpointer": checkpointer})
    )
    env = {
        "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}",
        "GATED_REACT_DB": str(workdir / "runs.sqlite"),
        "ATTACK_R6_LEDGER": str(workdir / "ledger.txt"),
    }
    dev = DevServer(workdir, env, config=config)
    try:
        dev.start()
        yield dev
    finally:
        dev.cleanup()


def _payments(server: DevServer) -> list[str]:
    ledger = server.workdir / "ledger.txt"
    return ledger.read_text().splitlines() if ledger.exists() else []


async def _paid_once(client: LangGraphClient) -> tuple[str, str]:
    """A thread whose run paid once and ended ``success``; and its checkpoint before the gate."""
    tid = (await client.threads.create())["thread_id"]
    out = await client.runs.wait(tid, "payments", input={"goal": "pay a"})
    assert isinstance(out, dict)
    assert out["stop_reason"] == "success", out
    history = await client.threads.get_history(tid, limit=50)
    before_gate = next(s for s in history if s["next"] == ["gate"])
    return tid, before_gate["checkpoint"]["checkpoint_id"]


def test_rest_replay_without_a_command_stops_as_documented(server: DevServer) -> None:
    """``runs.wait(input=None, checkpoint_id=<before the gate>)``: the replayed call is found
    done in the run's record and answered with what it returned; the run ends ``success``
    with 1 payment (a call found started but not done would stop ``tool_outcome_unknown``)."""

    async def scenario(client: LangGraphClient) -> Any:
        tid, old = await _paid_once(client)
        return await client.runs.wait(tid, "payments", input=None, checkpoint_id=old)

    before = len(_payments(server))
    out = drive(server, scenario)
    assert out["stop_reason"] == "success"
    assert len(_payments(server)) - before == 1


def test_rest_replay_sent_as_a_resume_pays_again_unasked(server: DevServer) -> None:
    """``runs.wait(command={"resume": 1}, checkpoint_id=<before the gate>)`` on a thread that
    paid once: the server's run is not seen as time travel, and the payment ran 2 times,
    unasked (no approval policy); the thread reads ``success``."""

    async def scenario(client: LangGraphClient) -> Any:
        tid, old = await _paid_once(client)
        return await client.runs.wait(tid, "payments", command=Command(resume=1), checkpoint_id=old)

    before = len(_payments(server))
    out = drive(server, scenario)
    paid = len(_payments(server)) - before
    assert paid == 1, f"the payment ran {paid} times, unasked; the run says {out['stop_reason']}"


def test_rest_fork_of_an_old_checkpoint_continued_pays_again_unasked(server: DevServer) -> None:
    """``threads.update_state(tid, None, as_node="validate", checkpoint_id=<before the
    gate>)`` (no channel written) then ``runs.wait(input=None)`` with no checkpoint_id: the
    payment ran 2 times, unasked, and the thread reads ``success``."""

    async def scenario(client: LangGraphClient) -> Any:
        tid, old = await _paid_once(client)
        await client.threads.update_state(tid, None, as_node="validate", checkpoint_id=old)
        return await client.runs.wait(tid, "payments", input=None)

    before = len(_payments(server))
    out = drive(server, scenario)
    paid = len(_payments(server)) - before
    assert paid == 1, f"the payment ran {paid} times, unasked; the run says {out['stop_reason']}"


def test_rest_replay_of_the_input_checkpoint_of_a_message_without_an_id_pays_once(
    server: DevServer,
) -> None:
    """A chat client's question (``{"role": "user", "content": ...}``, no id) then
    ``runs.wait(input=None, checkpoint_id=<the run's input checkpoint>)`` twice: every replay
    asks the same question (the id given when the input was sent is in the input checkpoint),
    so the record answers the payment; without it each replay was a new run and paid."""

    async def scenario(client: LangGraphClient) -> Any:
        tid = (await client.threads.create())["thread_id"]
        said = {"messages": [{"role": "user", "content": "pay a"}]}
        first = await client.runs.wait(tid, "payments", input=said)
        history = await client.threads.get_history(tid, limit=50)
        (started,) = [s for s in history if s["metadata"]["source"] == "input"]
        old = started["checkpoint"]["checkpoint_id"]
        replays = [
            await client.runs.wait(tid, "payments", input=None, checkpoint_id=old) for _ in range(2)
        ]
        return first, replays

    before = len(_payments(server))
    first, replays = drive(server, scenario)
    assert len(_payments(server)) - before == 1
    asked = first["messages"][0]["id"]
    assert [out["messages"][0]["id"] for out in replays] == [asked, asked]
    assert [out["stop_reason"] for out in replays] == ["success", "success"]


def test_rest_replay_of_a_served_parents_input_checkpoint_pays_once(server: DevServer) -> None:
    """The agent as the node of a parent graph served through ``naming_inputs``: a chat
    client's question without an id, then the parent's input checkpoint replayed twice through
    the REST API; one payment (the parent's ``add_messages`` alone would give the question a
    new id at each replay, and each would be a new run of the agent)."""

    async def scenario(client: LangGraphClient) -> Any:
        tid = (await client.threads.create())["thread_id"]
        said = {"messages": [{"role": "user", "content": "pay a"}]}
        await client.runs.wait(tid, "desk", input=said)
        history = await client.threads.get_history(tid, limit=50)
        (started,) = [s for s in history if s["metadata"]["source"] == "input"]
        old = started["checkpoint"]["checkpoint_id"]
        return [
            await client.runs.wait(tid, "desk", input=None, checkpoint_id=old) for _ in range(2)
        ]

    before = len(_payments(server))
    replays = drive(server, scenario)
    assert len(_payments(server)) - before == 1
    assert [out["messages"][-1]["content"] for out in replays] == ["done", "done"]
