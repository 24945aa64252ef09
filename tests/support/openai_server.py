"""An HTTP server on 127.0.0.1 that speaks the chat-completions API, scripted per test.

The real ``ChatOpenAI`` client talks to it over TCP, so timeouts, retries, status codes and broken
bodies are exercised exactly as in production. Script items, served one per request in order:

    reply("text")                  a normal completion (JSON mode: put the JSON in the text)
    tool_call("name", a=1)         a completion with one native tool call
    Reply(tool_calls=[...])        several calls, or raw argument strings
    Status(429)                    an error status with an OpenAI-style error body
    Delay(5.0, reply("late"))      answer after a pause (the client may time out first)
    Raw(b"{not json")              a body that is not what the client expects
    Drop()                         headers promise more body than is sent, then the socket closes
    empty_choices()                a 200 completion whose ``choices`` list is empty
    callable(request_json) -> item

``server.wait_for_requests(n)`` blocks until ``n`` requests arrived (e.g. the slow one a test
is about to interrupt).

Streaming requests (``"stream": true``) get server-sent events built from the same items; as
OpenAI, vLLM and llama.cpp do, the usage chunk comes only when the request asks for it
(``stream_options.include_usage``, what ``ChatOpenAI(stream_usage=True)`` sends).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .reaping import PATIENCE


@dataclass
class Reply:
    """A successful completion."""

    content: str | None = None
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    prompt_tokens: int = 11
    completion_tokens: int = 7
    cached_tokens: int | None = None
    """Reported as ``usage.prompt_tokens_details.cached_tokens``, as OpenAI does."""


@dataclass
class Status:
    """An HTTP error with an OpenAI-shaped body."""

    code: int
    message: str = "scripted error"
    error_code: str | None = None
    headers: dict[str, str] = field(default_factory=lambda: {"retry-after": "0"})


@dataclass
class Delay:
    """Wait, then serve ``then``."""

    seconds: float
    then: Any = None


@dataclass
class Raw:
    """A raw 200 body."""

    body: bytes
    content_type: str = "application/json"


@dataclass
class Drop:
    """Promise a long body, send a little, close."""


def reply(content: str) -> Reply:
    return Reply(content=content)


def tool_call(name: str, /, **args: Any) -> Reply:
    return Reply(tool_calls=[(name, args)])


def empty_choices() -> Raw:
    """A well-formed completion without any choice, as some proxies send on errors."""
    body = {"id": "chatcmpl-empty", "object": "chat.completion", "created": 0, "model": "fake"}
    return Raw(json.dumps({**body, "choices": []}).encode())


Item = Reply | Status | Delay | Raw | Drop | Callable[[dict[str, Any]], Any]


class FakeOpenAI:
    """``with FakeOpenAI([...]) as server: ChatOpenAI(base_url=server.base_url, ...)``."""

    def __init__(self, script: Iterable[Item] = (), *, default: Item | None = None) -> None:
        self._script: list[Item] = list(script)
        self._default = default
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        # A short poll: shutdown() waits for the loop's next turn (0.5 s by default, in every
        # test's teardown).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def wait_for_requests(self, count: int, timeout: float = PATIENCE) -> bool:
        """Wait until ``count`` requests have arrived; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.requests) >= count:
                    return True
            time.sleep(0.02)
        return False

    @contextlib.contextmanager
    def playing(
        self, script: Iterable[Item] = (), *, default: Item | None = None
    ) -> Iterator[FakeOpenAI]:
        """This server with its own script, default and request log for one module of tests
        (the session's shared ``langgraph dev`` talks to one server); the old ones back after."""
        with self._lock:
            saved = self._script, self._default, self.requests
            self._script, self._default, self.requests = list(script), default, []
        try:
            yield self
        finally:
            with self._lock:
                self._script, self._default, self.requests = saved

    def push(self, *items: Item) -> None:
        with self._lock:
            self._script.extend(items)

    def next_item(self, request: dict[str, Any]) -> Item:
        with self._lock:
            self.requests.append(request)
            if self._script:
                item = self._script.pop(0)
            elif self._default is not None:
                item = self._default
            else:
                item = Status(500, "FakeOpenAI: script exhausted")
        while callable(item) and not isinstance(item, Reply | Status | Delay | Raw | Drop):
            item = item(request)
        return item

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def completion(item: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": item.content}
    if item.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for name, args in item.tool_calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if item.tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": item.prompt_tokens,
            "completion_tokens": item.completion_tokens,
            "total_tokens": item.prompt_tokens + item.completion_tokens,
            **(
                {}
                if item.cached_tokens is None
                else {"prompt_tokens_details": {"cached_tokens": item.cached_tokens}}
            ),
        },
    }


def chunks(item: Reply, model: str, usage: bool = True) -> list[dict[str, Any]]:
    """The same completion as a stream of chunks: the text word by word, as a real server
    streams tokens, then the tool calls, the finish reason and (when asked) the usage."""
    whole = completion(item, model)
    base = {k: whole[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    words = re.findall(r"\S+\s*|\s+", item.content or "") or [""]
    deltas: list[dict[str, Any]] = [{"content": word} for word in words]
    deltas[0]["role"] = "assistant"
    if item.tool_calls:
        deltas[-1]["tool_calls"] = [
            {"index": i, **call}
            for i, call in enumerate(whole["choices"][0]["message"]["tool_calls"])
        ]
    finish = whole["choices"][0]["finish_reason"]
    return [
        *(base | {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas),
        base | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        *([base | {"choices": [], "usage": whole["usage"]}] if usage else []),
    ]


def _handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            request = json.loads(self.rfile.read(length) or b"{}")
            # A client that gave up (timeout) closed the socket: nothing left to send.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._serve(server.next_item(request), request)

        def _serve(self, item: Item, request: dict[str, Any]) -> None:
            if isinstance(item, Delay):
                time.sleep(item.seconds)
                item = item.then if item.then is not None else reply("late")
            if isinstance(item, Status):
                body = {
                    "error": {"message": item.message, "type": "error", "code": item.error_code}
                }
                self._json(item.code, body, item.headers)
            elif isinstance(item, Raw):
                self._send(200, item.body, item.content_type)
            elif isinstance(item, Drop):
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "1000")
                self.end_headers()
                self.wfile.write(b'{"id": "chatcmpl-x", "choi')
                self.wfile.flush()
                self.close_connection = True
            elif isinstance(item, Reply):
                model = str(request.get("model", "fake"))
                if request.get("stream"):
                    asked = bool((request.get("stream_options") or {}).get("include_usage"))
                    events = b"".join(
                        b"data: " + json.dumps(c).encode() + b"\n\n"
                        for c in chunks(item, model, usage=asked)
                    )
                    self._send(200, events + b"data: [DONE]\n\n", "text/event-stream")
                else:
                    self._json(200, completion(item, model))

        def _json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
            self._send(code, json.dumps(body).encode(), "application/json", headers)

        def _send(
            self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(code)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler
