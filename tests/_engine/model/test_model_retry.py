"""A model call retried through errors that pass, with the real ``ChatOpenAI`` client (its own
retries off: ``max_retries=0``) against the local chat-completions server, in both twins.

Before this module a server answering 500 or 429 once ended the run with ``llm_error`` for good
(nothing but the client's own retries tried again)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from gated_react._engine.deadline import DeadlinePassed
from gated_react._engine.model import model_retry
from gated_react._engine.model.model_retry import (
    Paid,
    Retries,
    Retry,
    acall_model,
    call_model,
    jittered,
    retry_after,
    transient,
)

from ...support.openai_server import Delay, Drop, FakeOpenAI, Raw, Status, reply
from ...support.reaping import PATIENCE

TWINS = ["sync", "async"]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A server of the test's own (``ChatOpenAI`` keeps an async connection pool per base URL,
    bound to the event loop that opened it); our own waits cut short (1 ms before the first
    retry), so a wait a test sees longer than that is one the server asked for."""
    monkeypatch.setattr(model_retry, "FIRST_WAIT", 0.001)
    with FakeOpenAI() as fake:
        yield fake


def _client(base_url: str, timeout: float | None = None, **http: Any) -> ChatOpenAI:
    """The real client with no retry of its own: every retry seen here is ours."""
    return ChatOpenAI(
        base_url=base_url,
        api_key=SecretStr("sk-test"),
        model="m",
        max_retries=0,
        timeout=timeout,
        **http,
    )


class Heard:
    """What the callbacks were told."""

    def __init__(self) -> None:
        self.retries: list[Retry] = []
        self.paid: list[Paid[Any]] = []

    def plan(self, seconds: float = PATIENCE, retries: int = 2) -> Retries:
        return Retries(seconds, retries, self.retries.append, self.paid.append)


def _ask(twin: str, base_url: str, retries: Retries, timeout: float | None = None) -> Any:
    """Each call on a connection pool of its own, closed after it: ``ChatOpenAI`` shares one
    per base URL, which kept connections (of a closed event loop, for the async twin) that the
    garbage collector later warned about in another test."""
    if twin == "async":
        return asyncio.run(_aask(base_url, retries, timeout))
    with openai.DefaultHttpxClient() as http:
        model = _client(base_url, timeout, http_client=http)
        return call_model(lambda: model.invoke("hi"), retries)


async def _aask(base_url: str, retries: Retries, timeout: float | None) -> Any:
    async with openai.DefaultAsyncHttpxClient() as http:
        model = _client(base_url, timeout, http_async_client=http)
        return await acall_model(lambda: model.ainvoke("hi"), retries)


@pytest.mark.parametrize("twin", TWINS)
def test_a_500_then_a_reply_is_retried_once_and_said(server: FakeOpenAI, twin: str) -> None:
    server.push(Status(500), reply("fine"))
    heard = Heard()
    answer = _ask(twin, server.base_url, heard.plan())
    assert answer.content == "fine"
    assert len(server.requests) == 2
    [retry] = heard.retries
    assert (retry.attempt, retry.attempts, retry.after) == (2, 3, "500")
    assert (
        retry.message == f"model call retried after 500, attempt 2 of 3, waiting {retry.wait:.1f} s"
    )
    assert isinstance(retry.error, openai.InternalServerError)
    assert [(p.attempt, p.reply) for p in heard.paid] == [(2, answer)]  # a 500 costs nothing


@pytest.mark.parametrize("twin", TWINS)
def test_a_429_waits_as_long_as_retry_after_asks(server: FakeOpenAI, twin: str) -> None:
    server.push(Status(429, headers={"retry-after": "0.4"}), reply("fine"))
    heard = Heard()
    assert _ask(twin, server.base_url, heard.plan()).content == "fine"
    [retry] = heard.retries
    assert retry.after == "429"
    assert retry.wait >= 0.4  # our own first wait is at most 1 ms here


@pytest.mark.parametrize("twin", TWINS)
def test_a_retry_after_past_the_deadline_fails_at_once(server: FakeOpenAI, twin: str) -> None:
    server.push(Status(429, headers={"retry-after": "3600"}), reply("never asked for"))
    heard = Heard()
    with pytest.raises(openai.RateLimitError):
        _ask(twin, server.base_url, heard.plan(seconds=60))
    assert len(server.requests) == 1
    assert heard.retries == []


@pytest.mark.parametrize("twin", TWINS)
def test_a_hung_server_is_retried_after_the_clients_timeout(server: FakeOpenAI, twin: str) -> None:
    """The first reply never came in time, but the server had the request: it may be billed,
    and ``on_paid`` says so (with no reply), then once more for the reply that came."""
    server.push(Delay(5, reply("late")), reply("fine"))
    heard = Heard()
    answer = _ask(twin, server.base_url, heard.plan(), timeout=0.3)
    assert answer.content == "fine"
    assert [r.after for r in heard.retries] == ["a timeout"]
    assert [(p.attempt, p.reply) for p in heard.paid] == [(1, None), (2, answer)]


@pytest.mark.parametrize("twin", TWINS)
def test_a_connection_dropped_mid_reply_is_retried(server: FakeOpenAI, twin: str) -> None:
    server.push(Drop(), reply("fine"))
    heard = Heard()
    assert _ask(twin, server.base_url, heard.plan()).content == "fine"
    assert [r.after for r in heard.retries] == ["a connection error"]
    assert [p.attempt for p in heard.paid] == [1, 2]


@pytest.mark.parametrize("twin", TWINS)
def test_a_refused_connection_is_retried_and_never_paid(twin: str) -> None:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]  # closed when the block ends: nothing listens there
    heard = Heard()
    with pytest.raises(openai.APIConnectionError):
        _ask(twin, f"http://127.0.0.1:{port}/v1", heard.plan(retries=1))
    assert [(r.attempt, r.after) for r in heard.retries] == [(2, "a connection error")]
    assert heard.paid == []  # nothing was sent


@pytest.mark.parametrize("twin", TWINS)
def test_the_deadline_ends_the_retries(server: FakeOpenAI, twin: str) -> None:
    """Ten retries allowed, a server down for good that asks for 0.4 s between tries, 1 s
    left: it stops when the next wait would end past the deadline, long before the attempts
    run out (an attempt started just before the deadline may end with it instead)."""
    heard = Heard()
    with server.playing(default=Status(503, headers={"retry-after": "0.4"})):
        with pytest.raises((openai.InternalServerError, DeadlinePassed)):
            _ask(twin, server.base_url, heard.plan(seconds=1, retries=10))
        assert 1 <= len(server.requests) <= 3
    assert sum(r.wait for r in heard.retries) < 1


@pytest.mark.parametrize("twin", TWINS)
def test_a_call_that_outlives_the_deadline_is_never_retried(server: FakeOpenAI, twin: str) -> None:
    server.push(Delay(PATIENCE, reply("late")))
    heard = Heard()
    with pytest.raises(DeadlinePassed):
        _ask(twin, server.base_url, heard.plan(seconds=0.5))
    assert len(server.requests) == 1
    assert heard.retries == []
    assert [(p.attempt, p.reply) for p in heard.paid] == [(1, None)]  # the server had it


FINAL = {
    "400": Status(400),
    "401": Status(401, "Incorrect API key provided"),
    "403": Status(403),
    "context too long": Status(400, "maximum context length", "context_length_exceeded"),
    "a 500 about the context": Status(500, "This model's maximum context length is 8192 tokens"),
    "quota used up": Status(429, "You exceeded your current quota", "insufficient_quota"),
    "the server says no": Status(503, headers={"x-should-retry": "false"}),
    "501": Status(501),
}


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("case", list(FINAL))
def test_errors_that_do_not_pass_are_never_retried(
    server: FakeOpenAI, twin: str, case: str
) -> None:
    server.push(FINAL[case], reply("never asked for"))
    heard = Heard()
    with pytest.raises(openai.APIStatusError):
        _ask(twin, server.base_url, heard.plan())
    assert len(server.requests) == 1
    assert heard.retries == heard.paid == []


def test_a_reply_that_is_no_completion_is_not_retried(server: FakeOpenAI) -> None:
    server.push(Raw(b"{not json"), reply("never asked for"))
    with pytest.raises(Exception, match="Expecting property name") as raised:
        _ask("sync", server.base_url, Heard().plan())
    assert not transient(raised.value)
    assert len(server.requests) == 1


def test_no_retries_is_one_attempt(server: FakeOpenAI) -> None:
    server.push(Status(503), reply("never asked for"))
    with pytest.raises(openai.InternalServerError):
        _ask("sync", server.base_url, Heard().plan(retries=0))
    assert len(server.requests) == 1


def test_any_call_can_be_retried() -> None:
    """The primitive takes any call: a middleware stack, a model of another provider."""
    replies: list[Any] = [httpx.ConnectError("refused"), AIMessage("fine")]

    def call() -> Any:
        item = replies.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    assert call_model(call, Retries(PATIENCE, retries=1)).content == "fine"


def _status_error(headers: dict[str, str]) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(429, request=request, headers=headers, json={"error": {}})
    return openai.RateLimitError("slow down", response=response, body=None)


def test_retry_after_in_milliseconds_seconds_or_a_date() -> None:
    assert retry_after(_status_error({"retry-after-ms": "250"})) == 0.25
    assert retry_after(_status_error({"retry-after": "2"})) == 2.0
    when = datetime.now(UTC) + timedelta(seconds=30)
    asked = retry_after(_status_error({"retry-after": format_datetime(when, usegmt=True)}))
    assert asked is not None
    assert 25 < asked <= 30
    assert retry_after(_status_error({"retry-after": "soon"})) is None
    assert retry_after(_status_error({"retry-after": "-3"})) is None
    assert retry_after(_status_error({})) is None


def test_waits_double_up_to_the_cap_and_keep_half_of_it_at_least(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(model_retry.random, "uniform", lambda low, high: high)
    assert [jittered(n, 0.5, 8.0) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    monkeypatch.setattr(model_retry.random, "uniform", lambda low, high: low)
    assert [jittered(n, 0.5, 8.0) for n in range(1, 4)] == [0.25, 0.5, 1.0]
