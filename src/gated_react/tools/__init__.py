"""Deterministic toolkits that reproduce the seed scenarios. Each tool checks its own arguments.

``idempotent``, the marker for tools safe to repeat, is imported from here; ``_meta`` holds it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool

from gated_react.tools._meta import idempotent

if TYPE_CHECKING:
    from gated_react.policy import Policy

__all__ = ["TOOLKITS", "idempotent", "load_toolkit", "toolkit_timeouts"]

TOOLKITS = ("support", "calculator", "sql", "workspace")


def load_toolkit(
    name: str, *, root: Path | None = None, database: Path | None = None
) -> list[BaseTool]:
    """The tools of one shipped toolkit; ``root``/``database`` configure workspace and sql."""
    factories: dict[str, Callable[[], list[BaseTool]]] = {
        "support": _support,
        "calculator": _calculator,
        "sql": lambda: _sql(database),
        "workspace": lambda: _workspace(root),
    }
    if name not in factories:
        raise ValueError(f"unknown toolkit {name!r}; choose from {', '.join(TOOLKITS)}")
    return factories[name]()


def toolkit_timeouts(names: Iterable[str], policy: Policy | None = None) -> dict[str, float]:
    """``policy``'s per-tool timeouts (none by default), plus what the tools of the shipped
    toolkits ``names`` need beyond its default, unless ``policy`` names them itself.

    ``run_tests`` kills its own sandbox at ``TEST_TIMEOUT_SECONDS``; the gate waits a little
    longer, so a slow suite ends with that clear error and the sandbox gone, not with the gate
    giving up at the 30 s default on a run that the tool's own limit still allows.
    """
    from gated_react.tools.workspace import TEST_TIMEOUT_SECONDS

    given = dict(policy.tool_timeouts) if policy else {}
    default = policy.tool_timeout_seconds if policy else 0.0
    needs = {"workspace": {"run_tests": TEST_TIMEOUT_SECONDS + 10.0}}
    for name in names:
        for tool, seconds in needs.get(name, {}).items():
            given.setdefault(tool, max(seconds, default))
    return given


def _support() -> list[BaseTool]:
    from gated_react.tools.support import SUPPORT_TOOLS

    return list(SUPPORT_TOOLS)


def _calculator() -> list[BaseTool]:
    from gated_react.tools.calculator import calculate

    return [calculate]


def _sql(database: Path | None) -> list[BaseTool]:
    from gated_react.tools.sql import sql_tools

    return sql_tools(database)


def _workspace(root: Path | None) -> list[BaseTool]:
    from gated_react.tools.workspace import workspace_tools

    return workspace_tools(root or Path.cwd())
