"""A model call's tokens as its provider reported them, taken only where they are counts: a
count that is not a non-negative integer is no report (the call is then estimated, never
trusted lower)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from gated_react._engine.model.pricing import Tokens

TOKEN_CAP = 10**15
"""The most one token count holds. A larger report is capped here, not refused, so it still
ends a run under ``max_tokens``; no store holds more than 64 bits, JSON clients 53 exactly."""


def reported_count(value: Any) -> int | None:
    """A count as a provider reported it, if it is one: a non-negative integer, capped at
    ``TOKEN_CAP``; None for anything else (missing, negative, a float, a string, a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return min(value, TOKEN_CAP)


def reported_tokens(message: BaseMessage) -> Tokens | None:
    """The reply's tokens by class, as the provider reported them; None when it reported none,
    a count that is not one, or 0 input and 0 output tokens (no model call costs nothing)."""
    reported = message.usage_metadata if isinstance(message, AIMessage) else None
    if not reported:
        return None
    found = (
        reported_count(reported.get("input_tokens")),
        reported_count(reported.get("output_tokens")),
    )
    inputs = _details(reported.get("input_token_details"), _INPUT_CLASSES)
    outputs = _details(reported.get("output_token_details"), _OUTPUT_CLASSES)
    if found[0] is None or found[1] is None or inputs is None or outputs is None:
        return None
    if not found[0] and not found[1]:
        return None
    read, written, heard = inputs
    written = min(written, found[0] - min(read, found[0]))
    return Tokens(
        input=found[0],
        cached=min(read, found[0]),
        output=found[1],
        cache_write=written,
        input_audio=min(heard, found[0]),
        output_audio=min(outputs[0], found[1]),
        reasoning=min(outputs[1], found[1]),
    )


_INPUT_CLASSES = ("cache_read", "cache_creation", "audio")
_OUTPUT_CLASSES = ("audio", "reasoning")


def _details(details: Any, keys: tuple[str, ...]) -> tuple[int, ...] | None:
    """The counts of one ``*_token_details`` mapping (absent ones 0); None if one is no count."""
    if details is None:
        return (0,) * len(keys)
    if not isinstance(details, Mapping):
        return None
    counts = tuple(reported_count(details.get(key, 0)) for key in keys)
    return None if None in counts else tuple(c for c in counts if c is not None)
