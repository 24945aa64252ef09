"""000 support refund, scripted: user 42 (yes, USD 49), user 7 (no), and the seed's experiments.

Each experiment changes one rule and shows which stop reason the policy, not the model, produces.
The example itself (goal, policy, tools) is ``gated_react.examples.support``.
"""

from __future__ import annotations

import json
from typing import Any

from gated_react.examples.support import EXAMPLE, TOOLS, goal_for
from scenarios.spec import Expect, Scenario, Seed, script


def tool(name: str, **args: Any) -> str:
    """A JSON-protocol reply that calls one tool."""
    return json.dumps({"kind": "tool", "name": name, "args": args})


def final(answer: str) -> str:
    """A JSON-protocol reply with the final answer."""
    return json.dumps({"kind": "final", "answer": answer})


ANNA = script(
    tool("get_user_profile", user_id=42),
    tool("get_user_billing", user_id=42),
    tool("search_policy", query="refund pro monthly"),
    final(
        "Yes: Anna's Pro monthly plan was first paid 10 days ago, inside the 14-day refund "
        "window, so USD 49 goes back to the original payment method."
    ),
)

MAX = script(
    tool("get_user_profile", user_id=7),
    tool("get_user_billing", user_id=7),
    tool("search_policy", query="free plan refund"),
    final("No: Max is on the free plan, which has no payments, so there is USD 0 to refund."),
)

SCENARIOS = (
    Scenario(
        name="user-42",
        shows="user 42 gets a refund: yes, USD 49",
        script=ANNA,
        expect=Expect("success", TOOLS, answer_has=("yes", "USD 49"), grounded=True),
    ),
    Scenario(
        name="user-7",
        shows="user 7 (free plan) gets no refund",
        goal=goal_for(7),
        script=MAX,
        expect=Expect("success", TOOLS, answer_has=("no", "free plan"), grounded=True),
    ),
    Scenario(
        name="no-search-policy",
        shows="search_policy is taken off the allowlist: the gate refuses it",
        changes={"allow": frozenset({"get_user_profile", "get_user_billing"})},
        script=ANNA,
        expect=Expect("tool_denied:search_policy", TOOLS),
    ),
    Scenario(
        name="one-tool-call",
        shows="max_tool_calls=1: the policy stops the second call, the model did not stop",
        changes={"max_tool_calls": 1},
        script=ANNA,
        expect=Expect("max_tool_calls", ("get_user_profile", "get_user_billing")),
    ),
    Scenario(
        name="missing-tool",
        shows="the model calls a tool that does not exist: tool_missing",
        script=script(
            tool("get_user_profile", user_id=42),
            tool("issue_refund", user_id=42, amount_usd=49),
        ),
        expect=Expect("tool_missing:issue_refund", ("get_user_profile", "issue_refund")),
    ),
    Scenario(
        name="soft-loop",
        shows="normalized loop detection: the same search, respaced and recased, is a loop",
        changes={"loop_detection": "normalized"},
        script=script(
            tool("search_policy", query="refund policy"),
            tool("search_policy", query="  Refund   POLICY "),
        ),
        expect=Expect("loop_detected", ("search_policy", "search_policy")),
    ),
)

SEED = Seed(EXAMPLE, SCENARIOS)
