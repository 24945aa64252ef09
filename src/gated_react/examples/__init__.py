"""The four seed systems as runnable examples: a registry by name.

    from gated_react import build_graph, examples

    example = examples.get("000-support")        # also "000" or "support"
    graph = build_graph(model, example.tools(workdir), policy=example.policy())
    graph.invoke({"goal": example.goal})

``names()`` lists the examples; ``get(name)`` raises ``UnknownExample`` (a ``ValueError`` whose
one-line message lists the valid names). ``example.tools(workdir)`` prepares any files the tools
work on (a copy of the sample project, of the database) inside ``workdir`` and returns the tools;
``example.policy(**changes)`` returns the example's policy, optionally changed.

The scripted runs of each example, with their expected outcomes, are not shipped: they are in the
repository's ``examples/`` folder, next to the scripts that run them.
"""

from __future__ import annotations

from gated_react.errors import GatedReactError
from gated_react.examples import coding, data_agent, search_calculate, support
from gated_react.examples.spec import Example

_EXAMPLES: tuple[Example, ...] = (
    support.EXAMPLE,
    coding.EXAMPLE,
    data_agent.EXAMPLE,
    search_calculate.EXAMPLE,
)


class UnknownExample(GatedReactError, ValueError):
    """No example by that name."""


def names() -> tuple[str, ...]:
    """The examples' names, in seed order."""
    return tuple(example.name for example in _EXAMPLES)


def get(name: str) -> Example:
    """An example by its name (``000-support``), its number (``000``) or its word (``support``)."""
    wanted = name.strip().lower()
    for example in _EXAMPLES:
        number, _, word = example.name.partition("-")
        if wanted in (example.name, number, word):
            return example
    raise UnknownExample(f"unknown example {name[:60]!r}; choose from {', '.join(names())}")


__all__ = ["Example", "UnknownExample", "get", "names"]
