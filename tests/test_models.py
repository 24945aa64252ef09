"""The real ChatOpenAI client against a local chat-completions server: a normal run in every
protocol and the basic failure mapping (the CLI's fault matrix extends this)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gated_react import Policy, build_graph
from gated_react.models import ModelNotConfigured, chat_model
from gated_react.settings import Settings
from gated_react.tools.support import SUPPORT_TOOLS

from .support.openai_server import FakeOpenAI, Reply, Status, reply, tool_call
from .support.results import invoked


def _settings(server: FakeOpenAI, **env: Any) -> Settings:
    return Settings(OPENAI_BASE_URL=server.base_url, OPENAI_MAX_RETRIES=0, **env)  # type: ignore[call-arg]


def test_tools_protocol_over_http() -> None:
    script = [tool_call("get_user_billing", user_id=42), reply("USD 49")]
    with FakeOpenAI(script) as server:
        graph = build_graph(chat_model(_settings(server)), SUPPORT_TOOLS)
        out = invoked(graph, {"goal": "refund?"})
    assert out["stop_reason"] == "success"
    assert out["usage"]["tokens"] == 36  # the server's reported usage, twice
    first = server.requests[0]
    assert first["temperature"] == 0
    assert {t["function"]["name"] for t in first["tools"]} == {t.name for t in SUPPORT_TOOLS}
    assert first["parallel_tool_calls"] is False  # OpenAI models call in parallel by default


def test_json_protocol_sends_the_action_schema() -> None:
    action = {"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}}
    script = [reply(json.dumps(action)), reply('{"kind": "final", "answer": "Anna"}')]
    with FakeOpenAI(script) as server:
        graph = build_graph(
            chat_model(_settings(server)), SUPPORT_TOOLS, policy=Policy(protocol="json")
        )
        out = invoked(graph, {"goal": "who is 42?"})
    assert out["answer"] == "Anna"
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["anyOf"]


def test_auth_failure_is_a_stop_reason() -> None:
    with FakeOpenAI([Status(401, "Incorrect API key provided: sk-abc123456789")]) as server:
        graph = build_graph(
            chat_model(_settings(server, OPENAI_API_KEY="sk-abc123456789")), SUPPORT_TOOLS
        )
        out = invoked(graph, {"goal": "x"})
    assert out["stop_reason"] == "llm_error:auth"
    assert "abc123456789" not in out["message"]


def test_no_model_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelNotConfigured, match="OPENAI_API_KEY"):
        chat_model(Settings())


def test_no_model_refuses_to_be_called_and_idle_graphs_keep_the_shape() -> None:
    from gated_react.graph import build_graph, idle_graph
    from gated_react.models import NoModel
    from gated_react.testing import ScriptedChatModel

    with pytest.raises(RuntimeError, match="no model to call"):
        NoModel().invoke("hello")
    idle = idle_graph().get_graph().draw_mermaid()
    assert idle == build_graph(ScriptedChatModel(replies=[]), []).get_graph().draw_mermaid()


def test_cached_tokens_the_server_reports_are_counted_beside_all_tokens() -> None:
    script = [
        Reply(
            tool_calls=[("get_user_billing", {"user_id": 42})], prompt_tokens=1500, cached_tokens=0
        ),
        Reply("USD 49", prompt_tokens=1600, completion_tokens=5, cached_tokens=1408),
    ]
    with FakeOpenAI(script) as server:
        graph = build_graph(
            chat_model(_settings(server)), SUPPORT_TOOLS, policy=Policy().replace(max_tokens=3200)
        )
        out = invoked(graph, {"goal": "refund?"})
    assert out["usage"]["cached_tokens"] == 1408
    assert out["usage"]["tokens"] == 1507 + 1605  # max_tokens counts every token, cached or not
    assert out["stop_reason"] == "success"


BILLING_CACHED = Reply(
    tool_calls=[("get_user_billing", {"user_id": 42})],
    prompt_tokens=10_000,
    completion_tokens=500,
    cached_tokens=8_000,
)
"""A tool call for which the server reports 10,000 input tokens, 8,000 of them cached."""


def test_cost_of_a_run_through_chatopenai_is_priced_with_its_cached_tokens() -> None:
    """gpt-4.1-mini (the default model) by genai-prices: 10,000 input tokens of which 8,000
    cached and 500 output cost 0.0024 USD by hand; the same without the cache 0.0048."""
    script = [
        BILLING_CACHED,
        Reply("USD 49", prompt_tokens=10_000, completion_tokens=500, cached_tokens=0),
    ]
    with FakeOpenAI(script) as server:
        graph = build_graph(chat_model(_settings(server)), SUPPORT_TOOLS)
        out = invoked(graph, {"goal": "refund?"})
    usage = out["usage"]
    assert (usage["input_tokens"], usage["cached_tokens"], usage["output_tokens"]) == (
        20_000,
        8_000,
        1_000,
    )
    assert usage["cost"] == pytest.approx(0.0024 + 0.0048)
    assert usage["unpriced"] is None


def test_max_cost_stops_before_the_tool_call_after_the_limit() -> None:
    script = [
        BILLING_CACHED,
    ]
    with FakeOpenAI(script) as server:
        policy = Policy().replace(max_cost=0.002)
        graph = build_graph(chat_model(_settings(server)), SUPPORT_TOOLS, policy=policy)
        out = invoked(graph, {"goal": "refund?"})
    assert out["stop_reason"] == "max_cost"
    assert out["message"] == "max_cost 0.002 USD reached (0.002400 USD spent)"
    assert out["history"] == []  # the billing call never ran
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("policy", "requests"),
    [
        (None, 3),  # no graph retries: the client's own (OPENAI_MAX_RETRIES=2) try it 3 times
        (Policy(), 1),  # the graph retries (model_retries=2): the client sends one request
        (Policy(model_retries=0), 3),
    ],
)
def test_the_clients_retries_are_off_while_the_graphs_are_on(
    policy: Policy | None, requests: int
) -> None:
    """Each of the graph's attempts would be retried again by the client: a 500 would be sent
    3 x 3 times."""
    with FakeOpenAI(default=Status(500)) as server:
        settings = Settings(OPENAI_BASE_URL=server.base_url, OPENAI_MAX_RETRIES=2)  # type: ignore[call-arg]
        model = chat_model(settings, policy=policy)
        with pytest.raises(Exception, match="scripted error"):
            model.invoke("hi")
        assert len(server.requests) == requests
