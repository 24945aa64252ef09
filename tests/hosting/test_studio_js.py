"""``langgraph dev`` driven from Node by ``@langchain/langgraph-sdk`` (pinned in tests/js), the
client Agent Chat UI and LangGraph's React ``useStream`` hook are built on: a chat run streamed
in messages mode shows the answer once, word by word, under the id the thread stores; the
approval question reads as LangChain's HITL request and each decision goes back with
``command: {resume: ...}``; a message typed while the question waits starts a new run; the
thread's final messages are what the UI renders. Skipped, with the reason, without node and npm;
``GATED_REACT_REQUIRE_NODE=1`` (CI) fails instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware.human_in_the_loop import HITLRequest
from langchain_core.messages import convert_to_messages
from pydantic import TypeAdapter

from gated_react._engine.conversation.transcript import calls_shown

from ..support.openai_server import Reply, reply, tool_call
from ..support.studio_server import DevServer

pytestmark = pytest.mark.studio

JS = Path(__file__).parents[1] / "js"
SDK = JS / "node_modules" / "@langchain" / "langgraph-sdk" / "package.json"
REQUIRE_VAR = "GATED_REACT_REQUIRE_NODE"
ANNA = {"currency": "USD", "plan": "pro_monthly", "price_usd": 49.0, "days_since_first_payment": 10}
REJECTED = "I did not finish: a new message came before get_user_billing could be settled."


def _model(request: dict[str, Any]) -> Reply:
    """Stateless: says hello when asked to, else reads user 42's billing and answers with what
    the tool message said."""
    messages = convert_to_messages(request["messages"])
    asked = [str(m.content) for m in messages if m.type == "human"]
    if any(text.endswith("just say hello.") for text in asked):
        return reply("Hello! What can I do for you?")
    if not calls_shown(messages):
        return tool_call("get_user_billing", user_id=42)
    seen = [m.content for m in messages if m.type == "tool"]
    return reply(f"observed: {seen[-1]}")


STUDIO_DEFAULT = _model  # what the model answers on tests/conftest.py's dev


def _tools() -> tuple[str, str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        why = "node and npm are needed to run @langchain/langgraph-sdk"
        if os.environ.get(REQUIRE_VAR, "").strip() not in ("", "0"):
            pytest.fail(f"{why}, but {REQUIRE_VAR}=1 requires them", pytrace=False)
        pytest.skip(why)
    return node, npm


@pytest.fixture(scope="module")
def seen(dev: DevServer) -> dict[str, Any]:
    """What the Node client saw of every scenario (tests/js/chat.mjs), on the session's server."""
    node, npm = _tools()
    if not SDK.is_file() or json.loads(SDK.read_text())["version"] != "2.0.0":
        install = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"]
        subprocess.run(install, cwd=JS, check=True, timeout=600, capture_output=True)
    return _drive(node, dev)


def _drive(node: str, server: DevServer) -> dict[str, Any]:
    done = subprocess.run(
        [node, "chat.mjs", server.url],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{done.stderr}\n{server.tail()}"
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_the_answer_streams_once_word_by_word_under_its_stored_id(seen: dict[str, Any]) -> None:
    chat = seen["chat"]
    answer = chat["messages"][-1]
    assert [m["type"] for m in chat["messages"]] == ["human", "ai", "tool", "ai"]
    assert answer["content"] == f"observed: {json.dumps({'billing': ANNA})}"
    # the step's call and result stream whole; the answer word by word
    streamed = [
        m for m in chat["streamed"] if m["type"] in ("ai", "AIMessageChunk") and m["content"]
    ]
    assert len(streamed) > 1  # word by word
    assert {m["id"] for m in streamed} == {answer["id"]}
    assert "".join(m["content"] for m in streamed) == answer["content"]  # once
    assert all(not m["tool_call_chunks"] for m in chat["streamed"])


@pytest.mark.parametrize(
    ("decision", "status", "stop_reason"),
    [
        ("approve", "ok", "success"),
        ("edit", "ok", "success"),
        ("reject", "stopped", "tool_rejected:get_user_billing"),
        ("respond", "ok", "success"),
    ],
)
def test_each_decision_goes_back_with_command_resume(
    seen: dict[str, Any], decision: str, status: str, stop_reason: str
) -> None:
    got = seen[decision]
    assert got["next"] == ["gate"]
    question = got["question"]
    hitl = {key: question[key] for key in HITLRequest.__annotations__}
    TypeAdapter(HITLRequest).validate_python(hitl, strict=True)
    assert hitl["action_requests"][0]["name"] == "get_user_billing"
    assert (got["status"], got["stop_reason"]) == (status, stop_reason)
    assert [m["type"] for m in got["messages"]] == ["human", "ai", "tool", "ai"]
    answer = got["messages"][-1]["content"]
    if decision == "edit":
        assert '"plan": "free"' in answer  # user 7's billing, the edited call's
    if decision == "respond":  # (its trace entry, by_human: test_studio_hitl.py)
        assert answer == "observed: Billing is down; they paid USD 49."


def test_a_message_typed_while_the_question_waits_starts_a_new_run(seen: dict[str, Any]) -> None:
    got = seen["cut_in"]
    # the thread's values hold the conversation and the stop; its trace and fresh budgets are
    # the run's record (test_studio_chat.py reads them from the server's store)
    assert (got["status"], got["stop_reason"], got["interrupts"]) == ("ok", "success", [])
    shown = [(m["type"], m["content"]) for m in got["messages"]]
    assert [who for who, _ in shown] == ["human", "ai", "tool", "ai", "human", "ai"]
    assert shown[0][1] == "Can user 42 get a refund?"
    assert shown[2][1].startswith("not run (tool_rejected:get_user_billing)")
    assert shown[3][1] == REJECTED
    assert shown[4:] == [
        ("human", "Never mind, just say hello."),
        ("ai", "Hello! What can I do for you?"),
    ]
    assert all(m["id"] for m in got["messages"])  # a UI keys its list on them
