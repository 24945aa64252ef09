"""The keys a call is known by, all from the canonical JSON of its arguments: the trace's
argument hash, the loop key the gate compares, and the idempotency key a tool may receive.

Each call the gate lets through leaves a loop key in ``State.seen``: the tool, the hash of its
exact arguments and the hash of their normalized form, so either loop mode is one string
comparison per earlier call and nothing is re-serialized.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from gated_react.policy import LoopMode

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


def idempotency_key(thread: str, step: int, tool: str, args: dict[str, Any]) -> str:
    """Stable for one thread, step, tool and arguments: a retried or resumed call sends the
    same key, so a tool that honours it runs its side effect once."""
    return short_hash(f"{thread}:{step}:{tool}:{canonical_json(args)}", 24)


def normalize(value: Any) -> Any:
    """Strings trimmed, inner whitespace collapsed and case-folded, at every depth."""
    if isinstance(value, str):
        return _SPACES.sub(" ", value.strip()).casefold()
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    return value


def loop_key(tool: str, args: dict[str, Any]) -> str:
    """``<tool>:<exact args hash>:<normalized args hash>``."""
    return f"{tool}:{args_hash(args)}:{args_hash(normalize(args))}"


def is_repeat(seen: Iterable[str], tool: str, args: dict[str, Any], mode: LoopMode) -> bool:
    """True when ``tool(args)`` already ran in this run (never, with mode ``off``)."""
    if mode == "off":
        return False
    name, exact, normalized = loop_key(tool, args).split(":")
    if mode == "exact":
        return any(key.startswith(f"{name}:{exact}:") for key in seen)
    return any(key.startswith(f"{name}:") and key.endswith(f":{normalized}") for key in seen)
