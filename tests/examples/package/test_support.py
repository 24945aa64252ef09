"""000 support refund as shipped: the JSON protocol, an explicit allowlist, its budgets."""

from __future__ import annotations

from gated_react import examples
from gated_react.examples import support

EXAMPLE = examples.get("000-support")


def test_the_example_speaks_the_json_protocol_with_an_explicit_allowlist() -> None:
    policy = EXAMPLE.policy()
    assert policy.protocol == "json"
    assert policy.allow == frozenset(support.TOOLS)
    assert (policy.budget.max_steps, policy.budget.max_tool_calls) == (8, 5)
