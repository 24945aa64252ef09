"""No secret leaves the library: not in results, stop messages, traces, stored checkpoints or
the messages of errors it raises. The API key reaches the model client from the environment;
a local chat-completions server echoes it back in every way a server can."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from gated_react import Policy, StoreError, aopen_checkpointer, build_graph, open_checkpointer, run
from gated_react.models import chat_model
from gated_react.settings import Settings
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.openai_server import FakeOpenAI, Raw, Reply, Status, tool_call
from ..support.results import invoked
from . import tally

KEYS = ["sk-live-0123456789abcdef", "opaque-local-key-77aa99"]  # the second has no known shape
PASSWORD = "hunter2-Pa55"


def echoes(key: str) -> list[Any]:
    """Every way a server might send the key back."""
    return [
        Status(401, f"Incorrect API key provided: {key}"),
        Status(403, f"key {key} may not use this model"),
        Status(400, f"bad request from {key}", error_code="invalid_request_error"),
        Status(429, f"rate limit for {key}"),
        Status(500, f"upstream said Authorization: Bearer {key}"),
        Raw(json.dumps({"error": {"message": key}}).encode()),
        Raw(f"<html>{key}</html>".encode(), content_type="text/html"),
        Reply(tool_calls=[("get_user_profile", f'{{"user_id": "{key}"')]),  # broken args
    ]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("item", range(8))
def test_a_server_echoing_the_api_key_never_leaks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, item: int
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "0")
    with FakeOpenAI([echoes(key)[item]], default=Status(500, f"again {key}")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        store = tmp_path / "runs.sqlite"
        with open_checkpointer(str(store)) as saver:
            graph = build_graph(chat_model(Settings()), SUPPORT_TOOLS, checkpointer=saver)
            out = run(graph, "Is user 42 refundable?")
    assert out["status"] == "stopped"
    assert key not in json.dumps(out, default=str)
    assert key.encode() not in store.read_bytes()  # nor in any stored checkpoint
    tally.count("secret checks: model errors")


@tool
def call_partner_api(user_id: int) -> str:
    """Calls a partner API with the same key (and a database), and fails loudly."""
    raise ConnectionError(
        f"POST https://partner.example/refund?api_key={KEYS[1]} failed; "
        f"fallback postgresql://app:{PASSWORD}@db.internal:5432/shop refused; key {KEYS[1]}"
    )


@pytest.mark.parametrize("on_error", ["stop", "observe"])
def test_a_tool_error_never_carries_the_key_or_a_password(
    monkeypatch: pytest.MonkeyPatch, on_error: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEYS[1])
    script = [tool_call("call_partner_api", user_id=42), Reply(content="Partner is down.")]
    with FakeOpenAI(script) as server:
        settings = Settings(OPENAI_BASE_URL=server.base_url, OPENAI_MAX_RETRIES=0)  # type: ignore[call-arg]
        graph = build_graph(
            chat_model(settings),
            [call_partner_api],
            policy=Policy(on_tool_error=on_error),  # type: ignore[arg-type]
        )
        out = invoked(graph, {"goal": "Refund user 42 through the partner."})  # and its logs
        sent = json.dumps(server.requests)
    assert "failed" in json.dumps(out, default=str)
    for secret in (KEYS[1], PASSWORD):
        assert secret not in json.dumps(out, default=str)
        assert secret not in sent  # nor in what the model is shown next
    tally.count("secret checks: tool errors")


@tool
def stream_the_key(user_id: int) -> str:
    """Look up a user, streaming progress (this one streams the environment's key)."""
    import os

    from langgraph.config import get_stream_writer

    key = os.environ["OPENAI_API_KEY"]
    get_stream_writer()({"progress": f"calling with {key}", "key": key})
    return "done"


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_a_tool_streaming_the_key_through_get_stream_writer_streams_it_masked(
    monkeypatch: pytest.MonkeyPatch, twin: str
) -> None:
    """Before: ``ToolRuntime.stream_writer`` masked the model's key, but the writer LangGraph's
    ``get_stream_writer()`` hands a tool streamed it raw in ``custom`` mode."""
    monkeypatch.setenv("OPENAI_API_KEY", KEYS[1])
    script = [tool_call("stream_the_key", user_id=42), Reply(content="Done.")]
    with FakeOpenAI(script) as server:
        settings = Settings(OPENAI_BASE_URL=server.base_url, OPENAI_MAX_RETRIES=0)  # type: ignore[call-arg]
        graph = build_graph(chat_model(settings), [stream_the_key])
        asked = {"goal": "Look up user 42."}
        if twin == "sync":
            chunks = list(graph.stream(asked, stream_mode="custom"))
        else:

            async def collect() -> list[Any]:
                return [c async for c in graph.astream(asked, stream_mode="custom")]

            chunks = asyncio.run(collect())
    assert chunks == [{"progress": "calling with ***", "key": "***"}]
    tally.count("secret checks: streamed")


STORE_URLS = [
    f"postgresql://app:{PASSWORD}@127.0.0.1:1/runs",
    f"postgres://app:{PASSWORD}@127.0.0.1:1/runs?connect_timeout=2",
    f"postgresql+psycopg://app:{PASSWORD}@127.0.0.1:1/runs",
    f"postgresql://127.0.0.1:1/runs?user=app&password={PASSWORD}",
    "postgresql://app:p%40ss%3Aw0rd%2F@127.0.0.1:1/runs",
    f"postgresql://app:{PASSWORD}@[::1:1/runs",
    f"mysql://app:{PASSWORD}@127.0.0.1/runs",
    f"redis://:{PASSWORD}@127.0.0.1:1/0",
]


@pytest.mark.parametrize("url", STORE_URLS)
def test_store_errors_never_show_the_database_password(url: str) -> None:
    with pytest.raises(StoreError) as err, open_checkpointer(url):
        pass
    message = str(err.value)
    assert PASSWORD not in message
    assert "p%40ss" not in message
    assert "\n" not in message
    tally.count("secret checks: store URLs")


@pytest.mark.parametrize("url", STORE_URLS[:2])
def test_async_store_errors_never_show_the_database_password(url: str) -> None:
    async def open_it() -> None:
        async with aopen_checkpointer(url):
            pass

    with pytest.raises(StoreError) as err:
        asyncio.run(open_it())
    assert PASSWORD not in str(err.value)
