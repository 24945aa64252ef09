"""The JSON text every key, hash, permit and signature is made of."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gated_react.jsontext import flat_json, json_encoder, json_object

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


_KEYS = st.text(max_size=8)
_SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([1e-4, 9.999999999999999e-05, 1e16, 9999999999999998.0, -0.0, 5e-324])
    | st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from('\x00\x1f\x7f"\\/\u2028'))
)


@given(st.dictionaries(_KEYS, _SCALAR, max_size=8))
@settings(max_examples=400, deadline=None)
def test_a_flat_dict_written_by_orjson_is_what_json_dumps_writes(value: dict[str, Any]) -> None:
    """Records and call keys are signed and hashed over this text: the fast path writes it
    byte for byte as ``json.dumps`` does, or leaves it to the C encoder."""
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"))
    fast = flat_json(value)
    assert fast is None or fast == expected
    assert json_encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)(value) == expected


def test_a_records_body_takes_the_fast_path() -> None:
    body = {"call": "c1", "cost": None, "ok": True, "seconds": 0.25, "shown": "record 1: x"}
    assert flat_json(body) == json.dumps(body, sort_keys=True, separators=(",", ":"))
    for slow in ({"n": 1e-5}, {"n": float("nan")}, {"s": "é"}, {"s": "\x7f"}, {"d": {}}, {1: 2}):
        assert flat_json(slow) is None


_JSON = st.recursive(
    _SCALAR.filter(lambda v: not isinstance(v, float) or not math.isnan(v)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


@given(_JSON)
@settings(max_examples=400, deadline=None)
def test_json_object_reads_what_json_loads_reads(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        assert repr(json_object(text)) == repr(json.loads(text))


def test_json_object_reads_what_orjson_refuses_and_refuses_what_json_refuses() -> None:
    longs = [f'{{"i": {n}}}' for n in (2**80, -(2**63) - 1, 2**64 - 1, -(2**63))]
    for text in ('{"n": NaN}', '{"s": "\\ud800"}', '{"a": 1, "a": 2}', '{"f": 1e400}', *longs):
        read = json_object(text)
        assert repr(read) == repr(json.loads(text))
    with pytest.raises(ValueError, match="Expecting property name"):
        json_object("{not json")
