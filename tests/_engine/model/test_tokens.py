"""A reply's tokens as its provider reported them: only counts are taken, capped; anything else
is no report (the call is estimated instead)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.messages.ai import UsageMetadata

from gated_react._engine.model.tokens import TOKEN_CAP, reported_count, reported_tokens


def _reply(input_tokens: int, output_tokens: int, **more: Any) -> AIMessage:
    usage = UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        **more,
    )
    return AIMessage("ok", usage_metadata=usage)


@pytest.mark.parametrize(
    ("value", "count"),
    [(0, 0), (7, 7), (-1, None), (2.0, None), ("7", None), (True, None), (None, None),
     (10**20, TOKEN_CAP)],
)  # fmt: skip
def test_a_count_is_a_non_negative_integer_capped(value: Any, count: int | None) -> None:
    assert reported_count(value) == count


def test_a_report_of_no_tokens_or_of_something_else_is_no_report() -> None:
    assert reported_tokens(_reply(0, 0)) is None
    assert reported_tokens(_reply(-5, 10)) is None
    assert reported_tokens(_reply(10, 5, input_token_details={"cache_read": -3})) is None  # type: ignore[typeddict-item]
    tokens = reported_tokens(_reply(10, 5, input_token_details={"cache_read": 50}))  # type: ignore[typeddict-item]
    assert tokens is not None
    assert (tokens.input, tokens.cached, tokens.output) == (10, 10, 5)  # never more than input
