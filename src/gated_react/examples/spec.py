"""The shape of an example: a goal, a policy, a tools factory, and scripted scenarios.

A scenario is one run with a scripted model: its replies, what it changes in the example's
policy (or tools, or goal), and the outcome it must end with.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from gated_react.policy import Policy
from gated_react.testing import Script

ToolsFactory = Callable[[Path], list[BaseTool]]
_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


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


def numbers(text: str) -> list[str]:
    """The numbers written in ``text``, normalized (``12,841.50`` -> ``12841.5``)."""
    found = []
    for raw in _NUMBER.findall(text):
        value = float(raw.replace(",", ""))
        found.append(f"{value:g}" if value != int(value) else str(int(value)))
    return found


def grounded(answer: str, result: Mapping[str, Any], goal: str = "") -> list[str]:
    """Numbers in the answer that appear in no tool observation (nor in the goal).

    An empty list means every number the model states was read from a tool, not made up.
    """
    seen = set(numbers(goal))
    for entry in result.get("history", []):
        seen.update(numbers(str(entry.get("observation"))))
    return [number for number in numbers(answer) if number not in seen]


@dataclass(frozen=True)
class Expect:
    """The outcome a scripted scenario must end with."""

    stop_reason: str
    calls: tuple[str, ...] = ()
    """Every call that reached the gate, in order (``trace``), refused or failed ones included."""
    errors: tuple[str, ...] = ()
    """The failures the model was shown instead of a stop (``trace[*].error``), in order."""
    answer_has: tuple[str, ...] = ()
    """Phrases the final answer contains (case-insensitive)."""
    grounded: bool = False
    """Every number in the answer must come from a tool observation (or the goal)."""

    def problems(self, result: Mapping[str, Any], goal: str = "") -> list[str]:
        """What differs from the expectation; empty when the run ended as expected."""
        found: list[str] = []
        if result.get("stop_reason") != self.stop_reason:
            got = result.get("stop_reason")
            found.append(f"stop_reason {got!r}, expected {self.stop_reason!r}")
        trace = result.get("trace", [])
        calls = tuple(entry["tool"] for entry in trace)
        if calls != self.calls:
            found.append(f"calls {list(calls)}, expected {list(self.calls)}")
        errors = tuple(entry["error"] for entry in trace if entry.get("error"))
        if errors != self.errors:
            found.append(f"errors {list(errors)}, expected {list(self.errors)}")
        answer = result.get("answer") or ""
        found.extend(
            f"answer lacks {phrase!r}"
            for phrase in self.answer_has
            if phrase.casefold() not in answer.casefold()
        )
        if self.grounded:
            made_up = grounded(answer, result, goal)
            if made_up:
                found.append(f"answer states numbers no tool returned: {made_up}")
        return found


@dataclass(frozen=True)
class Scenario:
    """One scripted run of an example."""

    name: str
    shows: str
    """One line: what the run demonstrates."""
    script: tuple[Script, ...]
    """The scripted model's replies, in order."""
    expect: Expect
    goal: str | None = None
    """None: the example's goal."""
    changes: Mapping[str, Any] = field(default_factory=dict)
    """Policy fields to change (``Budget`` fields may be given at top level)."""
    tools: ToolsFactory | None = None
    """None: the example's tools."""


@dataclass(frozen=True)
class Example:
    """A seed system on gated-react: what ``gated-react run --example NAME`` runs."""

    name: str
    title: str
    shows: str
    goal: str
    base_policy: Policy
    make_tools: ToolsFactory
    scenarios: tuple[Scenario, ...]
    """The first is the example's main run; the others are its experiments."""

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

    def scenario(self, name: str | None = None) -> Scenario:
        """A scenario by name; the main one when ``name`` is None."""
        if name is None:
            return self.scenarios[0]
        for scenario in self.scenarios:
            if scenario.name == name:
                return scenario
        valid = ", ".join(s.name for s in self.scenarios)
        raise ValueError(f"example {self.name} has no scenario {name!r}; choose from {valid}")

    def setup(self, scenario: Scenario, workdir: Path) -> tuple[str, Policy, list[BaseTool]]:
        """Goal, policy and tools for one scenario."""
        workdir.mkdir(parents=True, exist_ok=True)
        make = scenario.tools or self.make_tools
        return scenario.goal or self.goal, self.policy(**scenario.changes), make(workdir)


def script(*replies: Script) -> tuple[Script, ...]:
    """A scenario's replies (a tuple, so scenarios stay immutable)."""
    return tuple(replies)
