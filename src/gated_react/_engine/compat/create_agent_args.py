"""The arguments of ``create_agent`` that ``build_graph`` does not take, each refused with what
does its job here, so an app moving over reads the way forward instead of a bare TypeError."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gated_react.errors import ArgumentRefused

_PAUSES = "where a run pauses is policy: Policy(require_approval=...) and on_budget='ask'"
_INSTEAD = {
    "interrupt_before": _PAUSES,
    "interrupt_after": _PAUSES,
    "debug": "pass it per call: graph.invoke(..., debug=True)",
    "cache": "a node cache would replay a reply or a result the budgets never counted",
    "transformers": "not taken in this version",
}


def refuse(given: Mapping[str, Any]) -> None:
    """Raise ``ArgumentRefused`` for the first argument ``build_graph`` does not take."""
    for name in given:
        instead = _INSTEAD.get(name, "not an argument of build_graph or create_agent")
        raise ArgumentRefused(f"build_graph() does not take {name}=: {instead}")
