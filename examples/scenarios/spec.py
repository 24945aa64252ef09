"""The shape of a scripted scenario: one run of an example with a scripted model.

A scenario gives the scripted model's replies, what it changes in the example's policy (or
tools, or goal), and the outcome it must end with (``Expect``). A ``Seed`` is one example of
``gated_react.examples`` with its scenarios.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from gated_react.examples import Example
from gated_react.examples.spec import ToolsFactory
from gated_react.policy import Policy
from gated_react.testing import Script

_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


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

    def setup(self, example: Example, workdir: Path) -> tuple[str, Policy, list[BaseTool]]:
        """Goal, policy and tools for this scenario of ``example``."""
        workdir.mkdir(parents=True, exist_ok=True)
        make = self.tools or example.make_tools
        return self.goal or example.goal, example.policy(**self.changes), make(workdir)


@dataclass(frozen=True)
class Seed:
    """An example of ``gated_react.examples`` with its scripted scenarios."""

    example: Example
    scenarios: tuple[Scenario, ...]
    """The first is the example's main run; the others are its experiments."""

    def scenario(self, name: str | None = None) -> Scenario:
        """A scenario by name; the main one when ``name`` is None."""
        if name is None:
            return self.scenarios[0]
        for scenario in self.scenarios:
            if scenario.name == name:
                return scenario
        valid = ", ".join(s.name for s in self.scenarios)
        raise ValueError(
            f"example {self.example.name} has no scenario {name!r}; choose from {valid}"
        )


def script(*replies: Script) -> tuple[Script, ...]:
    """A scenario's replies (a tuple, so scenarios stay immutable)."""
    return tuple(replies)
