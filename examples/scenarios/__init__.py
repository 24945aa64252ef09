"""The scripted scenarios of the examples in ``gated_react.examples``, and their runner.

One module per example (``support``, ``coding``, ``data_agent``, ``search_calculate``, named as
in the package): the scripted model's replies for the example's main run and its experiments,
each with the outcome it must end with. ``runner.main`` is what the scripts in ``examples/`` run.
This is demo and test machinery (it drives ``gated_react.testing.ScriptedChatModel``), so it
stays in the repository and is not part of the installed package.

    from scenarios import get
    from scenarios.runner import run_scripted

    seed = get("000-support")                     # also "000" or "support"
    result, problems = run_scripted(seed.example, seed.scenario("user-7"))
"""

from __future__ import annotations

from gated_react import examples
from scenarios import coding, data_agent, search_calculate, support
from scenarios.spec import Expect, Scenario, Seed

SEEDS: tuple[Seed, ...] = (support.SEED, coding.SEED, data_agent.SEED, search_calculate.SEED)


def get(name: str) -> Seed:
    """An example's scenarios, by the example's name, number or word (as ``examples.get``)."""
    wanted = examples.get(name).name
    return next(seed for seed in SEEDS if seed.example.name == wanted)


__all__ = ["SEEDS", "Expect", "Scenario", "Seed", "get"]
