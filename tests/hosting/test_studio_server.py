"""A real ``langgraph dev`` with the repository's ``langgraph.json``, driven by ``langgraph-sdk``
(the client Studio uses); the server's model is a local chat-completions server."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient

from gated_react.hosting.studio import RefundContext, WorkbenchContext

from ..support.helpers import REFUND_GOAL
from ..support.openai_server import FakeOpenAI, reply, tool_call
from ..support.reaping import PATIENCE
from ..support.studio_server import REPO, DevServer, drive
from ..test_graph import EDGES, NODES
from .stored import stored, viewed

pytestmark = pytest.mark.studio
SAMPLE = json.loads((REPO / "langgraph.json").read_text())["env"]["GATED_REACT_STUDIO_WORKSPACE"]

BILLING_NEEDS_A_HUMAN = {"require_approval": ["get_user_billing"], "max_steps": 6}
REFUND_SCRIPT = [
    tool_call("get_user_profile", user_id=42),
    tool_call("get_user_billing", user_id=42),
    tool_call("search_policy", query="refund pro monthly"),
    reply("Yes: Anna's Pro monthly plan is within the 14-day window, USD 49.00 goes back."),
]


async def _system_assistant(client: LangGraphClient, graph_id: str) -> str:
    found = await client.assistants.search(graph_id=graph_id, metadata={"created_by": "system"})
    return str(found[0]["assistant_id"])


def test_the_drawing_shows_every_node_and_labelled_branch(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> None:
        for graph_id in ("refund", "workbench"):
            drawn = await client.assistants.get_graph(await _system_assistant(client, graph_id))
            assert {node["id"] for node in drawn["nodes"]} == NODES
            edges = {(e["source"], e["target"], e.get("data")) for e in drawn["edges"]}
            assert edges == EDGES
            conditional = {
                (e["source"], e["target"]) for e in drawn["edges"] if e.get("conditional")
            }
            assert conditional == {
                (s, t) for s, t, _ in EDGES if s in {"decide", "validate", "gate", "observe"}
            }

    drive(dev, scenario)


def test_the_assistant_form_is_the_policy_schema(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> None:
        for graph_id, schema in (("refund", RefundContext), ("workbench", WorkbenchContext)):
            shown = await client.assistants.get_schemas(await _system_assistant(client, graph_id))
            form = shown["context_schema"]
            expected = schema.model_json_schema()
            if graph_id == "workbench":  # the server's default is what langgraph.json names
                expected["properties"]["workspace_root"]["default"] = SAMPLE
            assert form == expected
            assert set(form["properties"]) == set(schema.model_fields)
            assert all(field["description"] for field in form["properties"].values())
            assert set(shown["input_schema"]["properties"]) == {"goal", "messages"}

    drive(dev, scenario)


def test_refund_run_pauses_for_approval_and_resumes(
    dev: DevServer, studio_model: FakeOpenAI
) -> None:
    studio_model.push(*REFUND_SCRIPT)

    async def scenario(client: LangGraphClient) -> str:
        assistant = await client.assistants.create(graph_id="refund", context=BILLING_NEEDS_A_HUMAN)
        aid, tid = assistant["assistant_id"], (await client.threads.create())["thread_id"]
        updates = [
            part.data
            async for part in client.runs.stream(
                tid, aid, input={"goal": REFUND_GOAL}, stream_mode="updates"
            )
            if part.event == "updates"
        ]
        nodes = [name for update in updates for name in update]
        assert nodes == [
            *("decide", "validate", "gate", "execute", "observe"),
            *("decide", "validate", "__interrupt__"),
        ]
        question = updates[-1]["__interrupt__"][0]["value"]
        assert (question["kind"], question["tool"], question["args"]) == (
            "approval",
            "get_user_billing",
            {"user_id": 42},
        )

        paused = await client.threads.get_state(tid)
        assert paused["next"] == ["gate"]
        assert "status" not in paused["values"]  # unset until the run ends
        assert paused["values"]["messages"][-1]["tool_calls"][0]["name"] == "get_user_billing"
        held = viewed(paused["values"])  # the history, from the conversation
        assert [step["action"]["name"] for step in held["history"]] == ["get_user_profile"]
        history = await client.threads.get_history(tid, limit=50)
        assert history[0]["checkpoint"] == paused["checkpoint"]  # newest first

        done = await client.runs.wait(tid, aid, command={"resume": {"approved": True}})
        assert isinstance(done, dict)
        values = (await client.threads.get_state(tid))["values"]
        assert values == done | {k: values[k] for k in values.keys() - done.keys()}
        final = viewed(values)
        assert (final["status"], final["stop_reason"]) == ("ok", "success")
        assert "USD 49.00" in str(final["answer"])
        return str(tid)

    tid = drive(dev, scenario)
    requests = studio_model.requests[-4:]
    assert [r["model"] for r in requests] == ["gpt-4.1-mini"] * 4
    tools = {t["function"]["name"] for t in requests[0]["tools"]}
    assert tools == {"get_user_profile", "get_user_billing", "search_policy"}
    record = stored(dev, tid)  # the run's record: every call the gate saw, the model calls paid
    assert [entry["tool"] for entry in record["trace"]] == [
        "get_user_profile",
        "get_user_billing",
        "search_policy",
    ]
    assert record["usage"]["steps"] == 4


def test_a_rejected_call_is_the_stop_reason_of_the_thread(
    dev: DevServer, studio_model: FakeOpenAI
) -> None:
    studio_model.push(tool_call("get_user_billing", user_id=42))

    async def scenario(client: LangGraphClient) -> str:
        assistant = await client.assistants.create(graph_id="refund", context=BILLING_NEEDS_A_HUMAN)
        aid, tid = assistant["assistant_id"], (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, aid, input={"goal": REFUND_GOAL})
        reject = {"resume": {"approved": False, "reason": "billing data stays private"}}
        await client.runs.wait(tid, aid, command=reject)
        final = (await client.threads.get_state(tid))["values"]
        assert (final["status"], final["stop_reason"]) == (
            "stopped",
            "tool_rejected:get_user_billing",
        )
        assert "billing data stays private" in final["message"]
        return str(tid)

    traced = stored(dev, drive(dev, scenario))["trace"]
    assert traced[-1]["stop_reason"] == "tool_rejected:get_user_billing"


def test_a_thread_deleted_through_the_api_takes_its_run_records_along(
    dev: DevServer, studio_model: FakeOpenAI
) -> None:
    """Before: ``threads.delete`` removed the checkpoints only; the records stayed, and the
    thread begun again under its id counted the deleted runs."""
    studio_model.push(reply("Hello."))

    async def scenario(client: LangGraphClient) -> tuple[int, int]:
        aid = await _system_assistant(client, "refund")
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, aid, input={"goal": "Say hello."})
        held = _records_of(dev, str(tid))
        await client.threads.delete(tid)
        return held, _records_of(dev, str(tid))

    held, left = drive(dev, scenario)
    assert held >= 3  # the run opened, its model call, its end
    assert left == 0


def _records_of(dev: DevServer, thread: str) -> int:
    with closing(sqlite3.connect(dev.workdir / "runs.sqlite")) as conn:
        found = conn.execute(
            "SELECT count(*) FROM gated_react_records WHERE thread_id = ?", (thread,)
        ).fetchone()
    return int(found[0])


def test_the_context_sets_model_budget_and_allowlist(
    dev: DevServer, studio_model: FakeOpenAI
) -> None:
    studio_model.push(tool_call("get_user_billing", user_id=42))
    context = {"model": "local-7b", "allow": ["get_user_profile"], "max_tool_calls": 1}

    async def scenario(client: LangGraphClient) -> dict[str, Any]:
        assistant = await client.assistants.create(graph_id="refund", context=context)
        tid = (await client.threads.create())["thread_id"]
        out = await client.runs.wait(tid, assistant["assistant_id"], input={"goal": "refund?"})
        assert isinstance(out, dict)
        return out

    out = drive(dev, scenario)
    assert (out["status"], out["stop_reason"]) == ("stopped", "tool_denied:get_user_billing")
    request = studio_model.requests[-1]
    assert request["model"] == "local-7b"
    assert [t["function"]["name"] for t in request["tools"]] == ["get_user_profile"]


def test_an_invalid_context_is_one_clear_error(dev: DevServer) -> None:
    async def scenario(client: LangGraphClient) -> list[Any]:
        bad = {"max_steps": 0, "protocl": "json"}
        assistant = await client.assistants.create(graph_id="refund", context=bad)
        tid = (await client.threads.create())["thread_id"]
        stream = client.runs.stream(tid, assistant["assistant_id"], input={"goal": "x"})
        return [part.data async for part in stream if part.event == "error"]

    errors = drive(dev, scenario)
    assert errors == [
        {
            "error": "ContextError",
            "message": "invalid context: max_steps: Input should be greater than or equal to 1 "
            "(got 0); protocl: Extra inputs are not permitted (got 'json')",
        }
    ]


def test_a_run_context_cannot_take_the_key_or_the_disk(dev: DevServer) -> None:
    with FakeOpenAI([reply("thanks for the key")]) as elsewhere:

        async def scenario(client: LangGraphClient) -> list[Any]:
            errors = []
            for graph, context in [
                ("refund", {"base_url": elsewhere.base_url}),
                ("workbench", {"workspace_root": "/"}),
            ]:
                tid = (await client.threads.create())["thread_id"]
                stream = client.runs.stream(tid, graph, input={"goal": "x"}, context=context)
                errors += [part.data["message"] async for part in stream if part.event == "error"]
            return errors

        errors = drive(dev, scenario)
        assert elsewhere.requests == []
    assert [message.split(":")[1] for message in errors] == [" base_url", " workspace_root"]


def test_the_workbench_calculates_and_reads_its_workspace(
    dev: DevServer, studio_model: FakeOpenAI, tmp_path: Path
) -> None:
    tmp_path = dev.workdir / "workspaces" / tmp_path.name  # a folder the server lets runs name
    tmp_path.mkdir(parents=True)
    (tmp_path / "notes.md").write_text("Order 17: 3 items at USD 12.50\n")
    studio_model.push(
        tool_call("read_file", path="notes.md"),
        tool_call("calculate", expression="3 * 12.50"),
        reply("USD 37.50"),
    )

    async def scenario(client: LangGraphClient) -> dict[str, Any]:
        context = {"workspace_root": str(tmp_path)}
        assistant = await client.assistants.create(graph_id="workbench", context=context)
        tid = (await client.threads.create())["thread_id"]
        out = await client.runs.wait(tid, assistant["assistant_id"], input={"goal": "total?"})
        assert isinstance(out, dict)
        return out

    out = viewed(drive(dev, scenario))
    assert out["answer"] == "USD 37.50", json.dumps(out, default=str)[:500]
    assert [step["observation"] for step in out["history"]] == [
        "Order 17: 3 items at USD 12.50\n",
        {"expression": "3 * 12.50", "result": 37.5},
    ]


def test_the_sdk_example_drives_the_server(dev: DevServer, studio_model: FakeOpenAI) -> None:
    studio_model.push(*REFUND_SCRIPT)
    example = REPO / "examples" / "api" / "studio_client.py"
    done = subprocess.run(
        [sys.executable, "-W", "error", str(example), dev.url],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[:5] == [
        f"node: {name}" for name in ("decide", "validate", "gate", "execute", "observe")
    ]
    assert "waiting at ['gate'] for: get_user_billing {'user_id': 42}" in lines
    assert "stop_reason: success" in lines
    assert f"answer: {REFUND_SCRIPT[-1].content}" in lines


def test_a_users_graph_reads_the_runs_context_under_langgraph_dev(tmp_path: Path) -> None:
    """A graph built with ``context_schema``, served by ``langgraph dev``: the run's context
    reaches its tool, and the server's assistant form is that schema."""
    config = tmp_path / "langgraph.json"
    graphs = {"ctx": {"path": "tests.support.context_graph:graph"}}
    config.write_text(json.dumps({"dependencies": [str(REPO)], "graphs": graphs}))
    server = DevServer(tmp_path, {"PYTHONPATH": str(REPO)}, config=config)

    async def scenario(client: LangGraphClient) -> tuple[dict[str, Any], Any]:
        assistant = await _system_assistant(client, "ctx")
        schemas = await client.assistants.get_schemas(assistant)
        tid = (await client.threads.create())["thread_id"]
        out = await client.runs.wait(
            tid, assistant, input={"goal": "whose?"}, context={"user_id": "u3"}
        )
        assert isinstance(out, dict)
        return out, schemas["context_schema"]

    try:
        server.start()
        out, schema = drive(server, scenario)
    finally:
        server.cleanup()
    results = [m["content"] for m in out["messages"] if m["type"] == "tool"]  # the conversation
    assert results == ["the run of u3"], out["message"]
    assert schema["title"] == "UserContext"


def test_the_checkpointer_has_what_the_server_asks_of_a_custom_one(dev: DevServer) -> None:
    """Before: the log warned that it lacked adelete_for_runs (multitask rollback left a
    cancelled run's checkpoints) and aprune (no thread pruning)."""

    async def scenario(client: LangGraphClient) -> None:
        await client.threads.get_state((await client.threads.create())["thread_id"])

    drive(dev, scenario)  # the server opens its checkpointer by now
    log = dev.log.read_text(errors="replace")
    assert "Using custom checkpointer: SqliteStore" in log
    assert "missing adelete_for_runs" not in log
    assert "missing aprune" not in log
