from __future__ import annotations

import pytest

from gated_react.redact import redact, secrets_of


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("key sk-proj-abcdef123456 leaked", "abcdef123456"),
        ("Authorization: Bearer abc.def.ghi123", "abc.def.ghi123"),
        ('{"authorization": "Basic dXNlcjpwYXNz"}', "dXNlcjpwYXNz"),
        ("api_key=supersecret1", "supersecret1"),
        ("postgresql://app:hunter22@db:5432/runs", "hunter22"),
        ("password='hunter22'", "hunter22"),
    ],
)
def test_known_shapes_are_masked(text: str, secret: str) -> None:
    assert secret not in redact(text)
    assert "***" in redact(text)


def test_given_secrets_are_masked_and_plain_text_kept() -> None:
    assert redact("token is abcd1234!", "abcd1234") == "token is ***!"
    assert redact("user 42 has no refund") == "user 42 has no refund"
    assert redact("postgresql://db/runs") == "postgresql://db/runs"


def test_secrets_of_finds_secret_attributes() -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="m", api_key="opaque-key-123", base_url="http://127.0.0.1:9/v1")
    assert secrets_of(model) == ("opaque-key-123",)
    assert secrets_of(object()) == ()
