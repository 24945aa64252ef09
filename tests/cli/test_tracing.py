"""The CLI exports its runs' spans where the standard OTEL_* variables say: the refund scenario
through the real client and the installed console script, read back from a real Arize Phoenix
(one process per command, so the spans are flushed at exit); an approval paused by ``run`` and
answered by ``resume`` is two invocations of one conversation, the second linked to the first
through the trace context kept in the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gated_react import open_checkpointer

from ..support.cli import REFUND, cli
from ..support.openai_server import FakeOpenAI, Reply, reply, tool_call
from ..support.phoenix import Phoenix

pytestmark = pytest.mark.phoenix
APPROVE = json.dumps({"decisions": [{"type": "approve"}]})


@pytest.fixture
def exporting(phoenix: Phoenix, state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Phoenix:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "gated-react-tests")
    monkeypatch.setenv("OPENAI_MODEL", "gpt-4.1-mini")
    return phoenix


def test_the_refund_scenario_as_phoenix_holds_it(exporting: Phoenix, server: FakeOpenAI) -> None:
    cached = Reply(tool_calls=[("get_user_billing", {"user_id": 42})], prompt_tokens=1600)
    cached.cached_tokens = 1280
    server.push(REFUND[0], cached, *REFUND[2:])
    done = cli("run", "refund for 42?", "--thread", "refund-42", "--json")
    assert done.returncode == 0, done.stderr
    spans = exporting.conversation("refund-42", 11)
    names = [s["name"] for s in spans]
    assert names.count("chat gpt-4.1-mini") == 4
    assert names.count("apply_guardrail gate") == 3
    assert [n for n in names if n.startswith("execute_tool")] == [
        "execute_tool get_user_profile",
        "execute_tool get_user_billing",
        "execute_tool search_policy",
    ]
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["attributes"]["gated_react.status"] == "ok"
    assert root["attributes"]["gated_react.stop_reason"] == "success"
    assert root["attributes"]["gated_react.usage.cost"] > 0
    chats = [s["attributes"] for s in spans if s["name"] == "chat gpt-4.1-mini"]
    assert chats[1]["gen_ai.usage.cache_read.input_tokens"] == 1280
    assert chats[1]["gen_ai.usage.input_tokens"] == 1600
    assert chats[1]["gated_react.usage.cost"] < chats[1]["gen_ai.usage.input_tokens"] * 4e-7
    assert {s["parent_id"] for s in spans if s is not root} == {root["context"]["span_id"]}


def _stored_traceparent(state_dir: Path, thread: str) -> str:
    """The trace context the thread's step in hand carries (a private channel: read from the
    newest checkpoint)."""
    with open_checkpointer(str(state_dir / "runs.sqlite")) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": thread}})
    assert found is not None
    return str(found.checkpoint["channel_values"]["step"]["traceparent"])


def _ids(span: dict[str, Any]) -> str:
    """The trace and span id part of a traceparent (its flags are the SDK's business)."""
    return f"00-{span['context']['trace_id']}-{span['context']['span_id']}-"


def test_a_resume_in_another_process_continues_the_conversation(
    exporting: Phoenix, server: FakeOpenAI, state_dir: Path
) -> None:
    server.push(tool_call("get_user_billing", user_id=42), reply("USD 49"))
    paused = cli("run", "refund?", "--thread", "ask-42", "--approve-tool", "get_user_billing")
    assert paused.returncode == 4, paused.stderr
    first_stored = _stored_traceparent(state_dir, "ask-42")
    done = cli("resume", "ask-42", "--approve-tool", "get_user_billing", "--answer", APPROVE)
    assert done.returncode == 0, done.stderr
    spans = exporting.conversation("ask-42", 7)
    roots = [s for s in spans if s["parent_id"] is None]
    assert [r["attributes"]["gated_react.status"] for r in roots] == ["paused", "ok"]
    # The resume linked its span to the one the store named (Phoenix keeps no links; the
    # link itself is checked in memory in tests/_engine/observability/test_tracing.py).
    assert first_stored.startswith(_ids(roots[0]))
    assert _stored_traceparent(state_dir, "ask-42").startswith(_ids(roots[1]))
    verdicts = [
        s["attributes"]["gen_ai.guardrail.result.value"]
        for s in spans
        if s["name"] == "apply_guardrail gate"
    ]
    assert verdicts == ["asked_human", "allowed"]
