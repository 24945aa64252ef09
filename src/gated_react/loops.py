"""Loop detection: a call is a loop when the same tool already ran with the same arguments.

Each call the gate lets through leaves a key in ``State.seen``: the tool, the hash of its exact
arguments and the hash of their normalized form, so either mode is one string comparison per
earlier call and nothing is re-serialized.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gated_react.canonical import args_hash, normalize
from gated_react.policy import LoopMode


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
