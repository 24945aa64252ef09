"""000 support refund: the gateway. JSON actions, an explicit allowlist, budgets, loop checks.

Anna (user 42, Pro monthly, USD 49, first paid 10 days ago) is inside the 14-day refund window;
Max (user 7) is on the free plan. The experiments change one rule each and show which stop
reason the policy, not the model, produces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from gated_react.examples.spec import Example, Expect, Scenario, script
from gated_react.policy import Budget, Policy
from gated_react.tools.support import SUPPORT_TOOLS

TOOLS = ("get_user_profile", "get_user_billing", "search_policy")


def goal_for(user_id: int) -> str:
    return (
        f"User {user_id} asked: can I get a refund for my subscription now? Check the profile, "
        "the billing and the refund policy with the tools, then answer in one short English "
        "sentence that starts with Yes or No and gives the USD amount and the reason."
    )


def tool(name: str, **args: Any) -> str:
    """A JSON-protocol reply that calls one tool."""
    return json.dumps({"kind": "tool", "name": name, "args": args})


def final(answer: str) -> str:
    """A JSON-protocol reply with the final answer."""
    return json.dumps({"kind": "final", "answer": answer})


def tools(_workdir: Path) -> list[BaseTool]:
    """The three support tools; they keep no files."""
    return list(SUPPORT_TOOLS)


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

EXAMPLE = Example(
    name="000-support",
    title="Support refund gateway",
    shows="JSON actions through the policy gateway: allowlist, budgets, loop detection",
    goal=goal_for(42),
    base_policy=Policy(
        protocol="json",
        allow=frozenset(TOOLS),
        budget=Budget(max_steps=8, max_tool_calls=5, max_seconds=20),
    ),
    make_tools=tools,
    scenarios=SCENARIOS,
)
