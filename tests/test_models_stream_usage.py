"""A cost budget holds when a client streams: the real ChatOpenAI, pointed at a base URL, sends
no token counts when streaming unless ``stream_usage=True``; the graph asks for them (for the
models this package builds and a copy of those the user passes), and a model that still
reports none stops with the fix named."""

from __future__ import annotations

from typing import Any

from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from gated_react import Policy, build_graph, result_of
from gated_react.models import chat_model
from gated_react.settings import Settings
from gated_react.tools.support import SUPPORT_TOOLS

from .support.openai_server import FakeOpenAI, reply, tool_call

COST_CAP = Policy().replace(max_cost=0.5)


def _client(server: FakeOpenAI, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=server.base_url, api_key=SecretStr("k"), model="gpt-4.1-mini", **kwargs
    )


def _streamed(graph: Any) -> dict[str, Any]:
    """Run under ``stream_mode="messages"``, as a chat UI does; the last values."""
    values: dict[str, Any] = {}
    for mode, chunk in graph.stream({"goal": "plan of 42?"}, stream_mode=["messages", "values"]):
        if mode == "values":
            values = chunk
    return {**values, **result_of(graph, values)}


def _script() -> list[Any]:
    return [tool_call("get_user_profile", user_id=42), reply("Anna is on the pro plan.")]


def test_a_streamed_run_under_max_cost_is_priced_with_a_users_chatopenai() -> None:
    with FakeOpenAI(_script()) as server:
        model = _client(server)
        out = _streamed(build_graph(model, SUPPORT_TOOLS, policy=COST_CAP))
        asked = [r.get("stream_options") for r in server.requests]
    assert out["stop_reason"] == "success", out["message"]
    assert out["usage"]["cost"] > 0
    assert out["usage"]["input_tokens"] == 22
    assert asked == [{"include_usage": True}] * 2
    assert model.stream_usage is None  # the user's object is not changed: a copy asks


def test_models_the_package_builds_ask_for_stream_usage() -> None:
    with FakeOpenAI(_script()) as server:
        model = chat_model(Settings(openai_base_url=server.base_url, openai_model="gpt-4.1-mini"))
        out = _streamed(build_graph(model, SUPPORT_TOOLS, policy=COST_CAP))
    assert out["stop_reason"] == "success", out["message"]
    assert model.stream_usage is True  # type: ignore[attr-defined]


def test_a_model_that_still_reports_no_usage_gets_the_fix_named() -> None:
    with FakeOpenAI(_script()) as server:
        out = _streamed(
            build_graph(_client(server, stream_usage=False), SUPPORT_TOOLS, policy=COST_CAP)
        )
    assert out["stop_reason"] == "max_cost"
    assert "max_cost 0.5 USD cannot be checked" in out["message"]
    assert "stream_usage=True" in out["message"]
