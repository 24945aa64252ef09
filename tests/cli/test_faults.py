"""The fault matrix: the real ChatOpenAI client, driven through ``gated-react run``, against a
scripted chat-completions server. Every fault comes after one good tool step, so each case also
shows that nothing already done is lost: history, trace and the stored thread stay intact."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from ..support.cli import REFUND, invoke
from ..support.openai_server import (
    Delay,
    Drop,
    FakeOpenAI,
    Raw,
    Reply,
    Status,
    empty_choices,
    reply,
    tool_call,
)

FIRST = tool_call("get_user_profile", user_id=42)
CONTEXT = "This model's maximum context length is 128000 tokens."

CASES: dict[str, tuple[list[Any], dict[str, str], str, int]] = {
    # name: (script after the first step, environment, stop reason, exit code)
    "slow reply": (
        [Delay(3, reply("late"))] * 2,
        {"OPENAI_TIMEOUT_SECONDS": "0.5", "OPENAI_MAX_RETRIES": "1"},
        "llm_timeout",
        3,
    ),
    "429 then success": ([Status(429), reply("USD 49")], {"OPENAI_MAX_RETRIES": "2"}, "success", 0),
    "429 forever": ([Status(429)] * 3, {"OPENAI_MAX_RETRIES": "2"}, "llm_error:rate_limited", 3),
    "500": ([Status(500)], {}, "llm_error:server_error", 3),
    "401": (
        [Status(401, "Incorrect API key provided: sk-live-abcdef123456")],
        {},
        "llm_error:auth",
        3,
    ),
    "403": ([Status(403)], {}, "llm_error:auth", 3),
    "context too long": (
        [Status(400, CONTEXT, "context_length_exceeded")],
        {},
        "llm_error:context_length",
        3,
    ),
    "body not JSON": ([Raw(b"{not json")], {}, "llm_error:bad_response", 3),
    "body not a completion": ([Raw(b'{"foo": 1}')], {}, "llm_error:bad_response", 3),
    "HTML body": ([Raw(b"<html>502</html>", "text/html")], {}, "llm_error:bad_response", 3),
    "empty choices": ([empty_choices()], {}, "llm_error:bad_response", 3),
    "dropped mid-response": ([Drop()] * 3, {}, "llm_error:connection", 3),
    "a tool that does not exist": (
        [tool_call("delete_account", user_id=42)],
        {},
        "tool_missing:delete_account",
        2,
    ),
    "invalid tool-call JSON": (
        [Reply(tool_calls=[("get_user_billing", '{"user_id": 4')])],
        {},
        "invalid_action:bad_json",
        2,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fault_matrix(case: str, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    script, env, reason, code = CASES[case]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    server.push(FIRST, *script)
    out = invoke("run", "refund for 42?", "--json", "--thread", "t")
    assert out.exit_code == code, out.stderr
    assert out.stderr == ""
    result = json.loads(out.stdout)
    assert result["stop_reason"] == reason
    assert result["message"]
    assert "abcdef123456" not in out.stdout
    assert [h["action"]["name"] for h in result["history"]] == ["get_user_profile"]
    assert (result["trace"][0]["tool"], result["trace"][0]["ok"]) == ("get_user_profile", True)
    stored = json.loads(invoke("show", "t", "--json").stdout)
    assert {k: stored[k] for k in result} == result


def test_retries_are_the_graphs_own(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """OPENAI_MAX_RETRIES is the run's ``Policy.model_retries``: a 429 and a 500 are tried
    again by the graph (each attempt recorded), never also by the client (3 x 3 requests)."""
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "2")
    server.push(Status(429), Status(500), reply("fine"))
    out = invoke("run", "hi", "--json")
    assert json.loads(out.stdout)["answer"] == "fine"
    assert len(server.requests) == 3
    assert json.loads(out.stdout)["usage"]["steps"] == 1  # refused attempts are no model calls
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "0")
    server.push(Status(500), reply("never asked"))
    assert (
        json.loads(invoke("run", "hi", "--json").stdout)["stop_reason"] == "llm_error:server_error"
    )
    assert len(server.requests) == 4


def test_a_timeout_is_retried_then_reported(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_TIMEOUT_SECONDS", "0.3")
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "1")
    server.push(Delay(2, reply("late")), Delay(2, reply("late")))
    result = json.loads(invoke("run", "hi", "--json").stdout)
    assert result["stop_reason"] == "llm_timeout"
    assert "did not answer in time" in result["message"]
    assert len(server.requests) == 2
    assert result["usage"]["steps"] == 0  # no reply came: no decision was made
    assert result["usage"]["tokens"] > 0  # but a reply lost on its way back may have been paid


@pytest.mark.parametrize("protocol", ["tools", "json", "text"])
def test_normal_runs_in_every_protocol(server: FakeOpenAI, protocol: str) -> None:
    server.push(*_refund_script(protocol))
    out = invoke("run", "refund for 42?", "--json", "--protocol", protocol)
    assert out.exit_code == 0, out.stdout
    result = json.loads(out.stdout)
    assert result["stop_reason"] == "success"
    assert len(result["history"]) == 3
    first = server.requests[0]
    if protocol == "tools":
        assert {t["function"]["name"] for t in first["tools"]} >= {"get_user_billing"}
    elif protocol == "json":
        assert first["response_format"]["type"] == "json_schema"
        assert "tools" not in first
    else:
        assert "tools" not in first
        assert "response_format" not in first


def _refund_script(protocol: str) -> list[Any]:
    if protocol == "tools":
        return REFUND
    calls = [
        ("get_user_profile", {"user_id": 42}),
        ("get_user_billing", {"user_id": 42}),
        ("search_policy", {"query": "refund pro monthly"}),
    ]
    answer = "Yes, USD 49.00."
    if protocol == "json":
        steps = [json.dumps({"kind": "tool", "name": n, "args": a}) for n, a in calls]
        return [reply(s) for s in steps] + [reply(json.dumps({"kind": "final", "answer": answer}))]
    steps = [f"Thought: need data.\nAction: {n}\nAction Input: {json.dumps(a)}" for n, a in calls]
    return [reply(s) for s in steps] + [reply(f"Thought: done.\nFinish: {answer}")]


def test_a_hung_model_server_ends_the_run_when_the_time_budget_does(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client's own timeout (60 s here) is not what binds: the budget's seconds left are."""
    monkeypatch.setenv("OPENAI_TIMEOUT_SECONDS", "60")
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "2")
    server.push(FIRST, Delay(60, reply("late")))
    started = time.monotonic()
    out = invoke("run", "refund for 42?", "--json", "--max-seconds", "2")
    assert time.monotonic() - started < 30  # a guard: the server would hang for 60 s
    result = json.loads(out.stdout)
    assert (out.exit_code, result["stop_reason"]) == (2, "max_seconds")
    assert "while waiting for the model" in result["message"]
    assert 2.0 <= result["usage"]["seconds"] < 5
    assert [h["action"]["name"] for h in result["history"]] == ["get_user_profile"]
