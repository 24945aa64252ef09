"""Deterministic toolkits that reproduce the seed scenarios. Each tool checks its own arguments.

``idempotent``, the marker for tools safe to repeat, is imported from here; ``_meta`` holds it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from langchain_core.tools import BaseTool

from gated_react.tools._meta import idempotent

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


def toolkit_timeouts(names: Iterable[str]) -> dict[str, float]:
    """Per-tool timeouts the shipped toolkits need beyond a policy's 30 s default.

    ``run_tests`` kills its own sandbox at ``TEST_TIMEOUT_SECONDS``; the gate waits a little
    longer, so a slow suite ends with that clear error and the sandbox gone, not with the gate
    giving up at 30 s on a run that its own limit still allows.
    """
    from gated_react.tools.workspace import TEST_TIMEOUT_SECONDS

    needs = {"workspace": {"run_tests": TEST_TIMEOUT_SECONDS + 10.0}}
    return {tool: seconds for name in names for tool, seconds in needs.get(name, {}).items()}


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
