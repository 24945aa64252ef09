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


_SHAPES = [
    "key sk-proj-abcdef123456 leaked",
    "AUTHORIZATION: BEARER abc.def.ghi123",
    '{"Api-Key": "supersecret1", "note": "ok"}',
    "POSTGRESQL://app:hunter22@db:5432/runs",
    "PassWord=hunter22&x=1",
    "api_\u212aey=supersecret1",  # the Kelvin sign: IGNORECASE takes it for k
    "pa\u017f\u017fword=hunter22",  # the long s: IGNORECASE takes it for s
    "Bearer\u00a0abcdef123456 caf\u00e9",
    "plain text with no secret in it",
    "",
]


@pytest.mark.parametrize("text", _SHAPES)
def test_skipping_rules_never_changes_what_is_masked(text: str) -> None:
    """The scans ``redact`` skips (text without what a rule's match must contain) mask exactly
    what every rule applied to every text masks."""
    assert redact(text) == _every_rule(text)
    assert redact(text.upper()) == _every_rule(text.upper())


def _every_rule(text: str) -> str:
    from gated_react.redact import _RULES

    for pattern, replacement, _ in _RULES:
        text = pattern.sub(replacement, text)
    return text


def test_a_key_spelled_with_a_kelvin_sign_is_masked() -> None:
    assert "supersecret1" not in redact("api_\u212aey=supersecret1")
