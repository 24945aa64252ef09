"""The JSON text every key, hash, permit and signature is made of."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from gated_react.jsontext import json_encoder

_ENCODED = [
    {"b": [1, 2.5, float("nan"), None, True, -0.0, 1e300], "a": 'é\u2028"x\\\x01\ud800'},
    {"c": {"z": (1, 2)}, "d": datetime(2026, 1, 1, tzinfo=UTC)},
    "text", 5, [], {}, {1: "int keys", 2: 2}, {True: 1, False: 2},
]  # fmt: skip


@pytest.mark.parametrize(
    "options",
    [
        {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": True, "default": str},
        {"sort_keys": True, "ensure_ascii": False, "default": str},
        {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": True},
    ],
)
def test_an_encoder_made_once_writes_what_json_dumps_writes(options: dict[str, Any]) -> None:
    """The text every key, hash, permit and signature is made of: byte for byte
    ``json.dumps``'s, and its errors (a value holding itself, one JSON cannot hold)."""
    encode = json_encoder(**options)
    for value in _ENCODED if "default" in options else _ENCODED[:1] + _ENCODED[2:]:
        assert encode(value) == json.dumps(value, **options)
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular reference"):
        encode({"a": looped})
    if "default" not in options:
        with pytest.raises(TypeError, match="not JSON serializable"):
            encode({"x": object()})
