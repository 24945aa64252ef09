"""LangSmith tracing goes through LangChain's standard callbacks: with its environment variables
set, runs reach the configured endpoint; without them, nothing is sent anywhere."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ..support.cli import cli
from ..support.openai_server import FakeOpenAI, reply, tool_call


class Collector:
    """A stand-in LangSmith API on 127.0.0.1 that records what it is sent."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("content-length", 0))
                self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                collector.seen.append((self.command, self.path, headers))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = do_PATCH = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def langsmith() -> Iterator[Collector]:
    collector = Collector()
    thread = threading.Thread(target=collector.server.serve_forever, daemon=True)
    thread.start()
    yield collector
    collector.server.shutdown()
    collector.server.server_close()
    thread.join(timeout=5)


def _run(server: FakeOpenAI) -> None:
    server.push(tool_call("get_user_billing", user_id=42), reply("USD 49"))
    assert cli("run", "refund?", "--json").returncode == 0


def test_runs_are_traced_when_langsmith_is_configured(
    server: FakeOpenAI, langsmith: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", langsmith.url)
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-test-key-0000")
    _run(server)
    posts = [(path, headers) for method, path, headers in langsmith.seen if method == "POST"]
    assert posts, langsmith.seen
    assert all(path.startswith("/runs") for path, _ in posts)
    assert posts[0][1].get("x-api-key") == "lsv2-test-key-0000"


def test_nothing_is_sent_without_langsmith_settings(
    server: FakeOpenAI, langsmith: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGSMITH_TRACING", raising=False)
    monkeypatch.delenv("LANGCHAIN_TRACING_V2", raising=False)
    monkeypatch.setenv("LANGSMITH_ENDPOINT", langsmith.url)  # where traces would go
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-test-key-0000")
    _run(server)
    assert langsmith.seen == []
