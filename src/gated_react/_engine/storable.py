"""Values from outside the process (model replies, tool results, human edits) made storable.

A run's state must survive every checkpointer, so anything that enters it is plain JSON data
that msgpack and UTF-8 can carry: no lone surrogates (a JSON ``"\\ud800"`` escape decodes to
one), no integers beyond 64 bits and no nesting deeper than ``MAX_NESTING``. Without these
checks a model writing a 20-digit number, or a tool returning ``2 ** 100``, crashed a durable
run when its checkpoint was written.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gated_react.errors import GatedReactError, exception_line
from gated_react.redact import mask_secrets

MAX_NESTING = 64
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # what msgpack stores
_SURROGATES = re.compile("[\ud800-\udfff]")


class Unstorable(GatedReactError, ValueError):
    """A value that no checkpointer could store; the message says why in a few words."""


def clean_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """A plain ``str`` (no subclass) with lone surrogates replaced by U+FFFD and each of
    ``secrets`` (the model client's own key) masked."""
    text = str(text)
    if not text.isascii():  # asked in constant time; the pattern scans (5 us a kilobyte)
        text = _SURROGATES.sub("\ufffd", text)
    return mask_secrets(text, secrets)


def plain(value: Any, depth: int = 0, secrets: tuple[str, ...] = ()) -> Any:
    """``value`` with every string (keys too) cleaned; raises ``Unstorable`` for integers
    outside 64 bits and containers nested deeper than ``MAX_NESTING`` (cycles included)."""
    if isinstance(value, str):
        return clean_text(value, secrets)
    if isinstance(value, bool) or not isinstance(value, int | dict | list | tuple):
        return value
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise Unstorable(
                f"an integer outside the 64-bit range ({value.bit_length()} bits; "
                "from -2**63 to 2**64-1)"
            )
        return value
    if depth >= MAX_NESTING:
        raise Unstorable(f"values nested deeper than {MAX_NESTING} levels")
    if isinstance(value, dict):
        return {
            clean_text(str(key), secrets): plain(item, depth + 1, secrets)
            for key, item in value.items()
        }
    return [plain(item, depth + 1, secrets) for item in value]


_LEFT_OUT = object()


def json_data(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """The JSON data in ``value``, strings cleaned and ``secrets`` masked; what JSON cannot
    hold (objects, NaN, integers outside 64 bits, nesting past ``MAX_NESTING``) is left out,
    not refused: for what a reply says of itself, which no run depends on. None if nothing is
    left."""
    kept = _json(value, secrets, 0)
    return None if kept is _LEFT_OUT else kept


def _json(value: Any, secrets: tuple[str, ...], depth: int) -> Any:
    if not isinstance(value, dict | list | tuple):
        return _scalar(value, secrets)
    if depth >= MAX_NESTING:
        return _LEFT_OUT
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            kept = _json_item(item, secrets, depth + 1)
            if kept is not _LEFT_OUT:
                out[clean_text(str(key), secrets)] = kept
        return out
    return [kept for v in value if (kept := _json_item(v, secrets, depth + 1)) is not _LEFT_OUT]


def _json_item(value: Any, secrets: tuple[str, ...], depth: int) -> Any:
    """``_json`` of a container's item, its commonest kinds (text, numbers, a flag, nothing)
    settled here: a reply's metadata is a dozen of them a step."""
    kind = type(value)
    if kind is str:
        return clean_text(value, secrets)
    if kind is int:
        return value if _INT_MIN <= value <= _INT_MAX else _LEFT_OUT
    if kind is float:
        return value if math.isfinite(value) else _LEFT_OUT
    if kind is bool or value is None:
        return value
    return _json(value, secrets, depth)


def _scalar(value: Any, secrets: tuple[str, ...]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return clean_text(value, secrets)
    if isinstance(value, int):  # an IntEnum as the number: a store revives no class
        return int(value) if _INT_MIN <= value <= _INT_MAX else _LEFT_OUT
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else _LEFT_OUT
    return _LEFT_OUT


def error_text(exc: BaseException, *secrets: str) -> str:
    """An exception's message as one storable line, secrets masked; never raises."""
    return clean_text(exception_line(exc, *secrets))
