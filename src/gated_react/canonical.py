"""Canonical JSON of tool arguments: the basis of args hashes, loop signatures, idempotency keys."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

_SPACES = re.compile(r"\s+")


def canonical_json(value: Any) -> str:
    """JSON with keys sorted at every depth, no extra whitespace; non-JSON values become strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def short_hash(text: str, length: int = 12) -> str:
    """A short hex digest, stable across processes and machines."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def args_hash(args: dict[str, Any] | None) -> str:
    """The trace's hash of a call's arguments; key order never matters."""
    return short_hash(canonical_json(args or {}))


def normalize(value: Any) -> Any:
    """Strings trimmed, inner whitespace collapsed and case-folded, at every depth."""
    if isinstance(value, str):
        return _SPACES.sub(" ", value.strip()).casefold()
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    return value
