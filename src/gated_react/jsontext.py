"""JSON text written the same way everywhere it is hashed or signed, by encoders made once."""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

import orjson


def json_encoder(**options: Any) -> Callable[[Any], str]:
    """``json.JSONEncoder(**options).encode``, the same text, made once: ``json.dumps`` builds
    an encoder for each call, and ``JSONEncoder.encode`` builds its C encoder for each call
    too (half the cost of a call's arguments, and a step encodes them a dozen times: keys,
    hashes, permits, records). The C encoder made here keeps no table of the containers it is
    inside (a shared one would be written by two threads at once): a value that holds itself
    is encoded again by ``JSONEncoder``, which says so (``ValueError``)."""
    slow = json.JSONEncoder(**options)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C module
        return slow.encode
    strings = encode_basestring_ascii if slow.ensure_ascii else encode_basestring
    fast = make(None, slow.default, strings, None, slow.key_separator, slow.item_separator,
                slow.sort_keys, slow.skipkeys, slow.allow_nan)  # fmt: skip

    separators = (slow.item_separator, slow.key_separator)
    canonical = slow.sort_keys and slow.ensure_ascii and separators == (",", ":")

    def encode(value: Any) -> str:
        if canonical and type(value) is dict:
            text = flat_json(value)
            if text is not None:
                return text
        try:
            return "".join(fast(value, 0))
        except RecursionError:
            return slow.encode(value)

    return encode


def flat_json(value: dict[Any, Any]) -> str | None:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))``'s text for a dict of
    scalars, written by orjson (a fifth of the C encoder's cost, most of a record's signing
    on SQLite); None for anything else, which the caller's encoder writes.

    The same text by construction: the values are exactly ``str``, ``int``, ``bool``, None or
    a ``float`` that ``repr`` writes without an exponent (orjson writes those digit for digit
    as ``repr``), and the text is ASCII without DEL (what ``ensure_ascii`` would escape: a
    non-ASCII character, DEL). ``tests/test_jsontext.py`` compares the two."""
    for item in value.values():
        kind = type(item)
        if kind is float:
            if not (_PLAIN_FLOATS[0] <= abs(item) < _PLAIN_FLOATS[1] or item == 0.0):
                return None  # an exponent in repr, or NaN or infinity
        elif kind not in _SCALARS:
            return None
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # a key that is no str, an int past 64 bits
        return None
    return out.decode("ascii") if out.isascii() and b"\x7f" not in out else None


def json_object(text: str) -> Any:
    """``json.loads(text)``'s value; read by orjson (half the cost for a ``done`` record)
    when it is an object of scalars none of which is a float of 2**63 or more: an int past 64
    bits orjson reads as a float, and a value with containers is not walked for one.
    ``ValueError`` as ``json.loads`` raises it (orjson refuses NaN and lone surrogates, which
    json reads)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
    if type(value) is dict:
        for item in value.values():
            kind = type(item)
            if kind is dict or kind is list or (kind is float and abs(item) >= _INT_FLOATS):
                return json.loads(text)
        return value
    return json.loads(text)


_INT_FLOATS = float(2**63)
"""Where a float may be an int orjson could not hold (below -2**63, above 2**64 - 1)."""


_SCALARS = frozenset((str, int, bool, type(None)))
_PLAIN_FLOATS = (1e-4, 1e16)
"""The magnitudes ``repr`` writes a float in without an exponent."""
