from __future__ import annotations

import json

import httpx
import openai
import pytest

from gated_react._engine.model.model_errors import classify

from ...support.openai_server import FakeOpenAI, Raw, completion, reply

REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


def _status(code: int, body: dict | None = None) -> openai.APIStatusError:  # type: ignore[type-arg]
    response = httpx.Response(code, request=REQUEST, json=body or {"error": {"message": "nope"}})
    return openai.OpenAI(
        api_key="sk-test", base_url="http://127.0.0.1/v1"
    )._make_status_error_from_response(response)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (openai.APITimeoutError(request=REQUEST), "llm_timeout"),
        (TimeoutError(), "llm_timeout"),
        (_status(429), "llm_error:rate_limited"),
        (_status(401), "llm_error:auth"),
        (_status(403), "llm_error:auth"),
        (_status(404), "llm_error:not_found"),
        (_status(500), "llm_error:server_error"),
        (_status(503), "llm_error:server_error"),
        (
            _status(400, {"error": {"message": "x", "code": "context_length_exceeded"}}),
            "llm_error:context_length",
        ),
        (_status(400), "llm_error:bad_request"),
        (openai.APIConnectionError(request=REQUEST), "llm_error:connection"),
        (KeyError("choices"), "llm_error:KeyError"),
    ],
)
def test_classification(error: Exception, reason: str) -> None:
    stop = classify(error)
    assert str(stop) == reason
    assert stop.message


def test_messages_never_carry_secrets() -> None:
    error = _status(
        401, {"error": {"message": "Incorrect API key provided: sk-live-1234567890abcdef"}}
    )
    assert "1234567890abcdef" not in classify(error).message


def test_data_errors_outside_a_provider_client_keep_their_name() -> None:
    """``bad_response`` is only for a reply the client could not parse (see test_faults)."""
    assert str(classify(ValueError("x"))) == "llm_error:ValueError"
    assert str(classify(IndexError("x"))) == "llm_error:IndexError"


def test_given_secrets_are_masked_whatever_their_shape() -> None:
    error = _status(401, {"error": {"message": "Incorrect API key provided: local-0123456789"}})
    assert "local-0123456789" in classify(error).message  # no known shape: only the caller knows
    assert "local-0123456789" not in classify(error, "local-0123456789").message


def test_a_plain_completion_answering_a_streaming_call_is_a_bad_response() -> None:
    """What a server that ignores ``stream: true`` sends (Studio's messages mode streams every
    call); it was ``llm_error:ValueError``, named after LangChain's exception."""
    from langchain_openai import ChatOpenAI

    plain = json.dumps(completion(reply("hi"), "m")).encode()
    with FakeOpenAI([Raw(plain)]) as server:
        model = ChatOpenAI(model="m", base_url=server.base_url, api_key="sk-x", max_retries=0)
        with pytest.raises(ValueError, match="generation") as raised:
            list(model.stream("hi"))
    assert str(classify(raised.value)) == "llm_error:bad_response"


def test_an_index_error_is_a_bad_response_only_where_langchain_reads_the_reply() -> None:
    """By where it was raised, not by its text: the same words elsewhere keep the name."""

    def elsewhere() -> None:
        raise IndexError("list index out of range")

    with pytest.raises(IndexError) as raised:
        elsewhere()
    assert str(classify(raised.value)) == "llm_error:IndexError"
