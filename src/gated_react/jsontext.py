"""JSON text written the same way everywhere it is hashed or signed, by encoders made once."""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any


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

    def encode(value: Any) -> str:
        try:
            return "".join(fast(value, 0))
        except RecursionError:
            return slow.encode(value)

    return encode
