"""The shape of an example: a goal, a policy and a tools factory (what ``--example`` runs).

The scripted runs that demonstrate and check each example are not part of the package: they live
next to the scripts that run them, in the repository's ``examples/scenarios/``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from gated_react.policy import Policy

ToolsFactory = Callable[[Path], list[BaseTool]]


def package_files() -> Traversable:
    """The data files shipped with the examples (``gated_react/examples/files``)."""
    return files("gated_react.examples") / "files"


def copy_tree(source: Traversable, target: Path) -> None:
    """Copy shipped files to a real folder (works from a wheel, a zip or a source tree)."""
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.name == "__pycache__" or item.name.startswith("."):
            continue
        if item.is_dir():
            copy_tree(item, target / item.name)
        else:
            (target / item.name).write_bytes(item.read_bytes())


@dataclass(frozen=True)
class Example:
    """A seed system on gated-react: what ``gated-react run --example NAME`` runs."""

    name: str
    title: str
    shows: str
    goal: str
    base_policy: Policy
    make_tools: ToolsFactory

    def policy(self, **changes: Any) -> Policy:
        """The example's policy, with ``changes`` applied and validated (a typo is an error)."""
        return self.base_policy.replace(**changes)

    def tools(self, workdir: Path) -> list[BaseTool]:
        """The example's tools, with any files they work on prepared in ``workdir``.

        Calling it again with the same folder reuses what is there (a resumed run sees the same
        files).
        """
        workdir.mkdir(parents=True, exist_ok=True)
        return self.make_tools(workdir)
