"""Loop detection: a call is a loop when the same tool already ran with the same arguments."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gated_react.canonical import canonical_json, normalize
from gated_react.policy import LoopMode
from gated_react.state import HistoryEntry


def signature(tool: str, args: dict[str, Any], mode: LoopMode) -> str:
    """What two calls must share to count as the same call under ``mode``."""
    value = normalize(args) if mode == "normalized" else args
    return f"{tool}:{canonical_json(value)}"


def is_repeat(
    history: Iterable[HistoryEntry], tool: str, args: dict[str, Any], mode: LoopMode
) -> bool:
    """True when ``tool(args)`` already ran in this run (never, with mode ``off``)."""
    if mode == "off":
        return False
    wanted = signature(tool, args, mode)
    return any(
        entry.action.name == tool and signature(tool, entry.action.args, mode) == wanted
        for entry in history
    )
