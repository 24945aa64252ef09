"""000 support refund: the gateway. JSON actions, an explicit allowlist, budgets, loop checks.

Anna (user 42, Pro monthly, USD 49, first paid 10 days ago) is inside the 14-day refund window;
Max (user 7) is on the free plan. The example's goal asks about Anna; ``goal_for`` asks the same
question for any user.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool

from gated_react.examples.spec import Example
from gated_react.policy import Budget, Policy
from gated_react.tools.support import SUPPORT_TOOLS

TOOLS = ("get_user_profile", "get_user_billing", "search_policy")


def goal_for(user_id: int) -> str:
    return (
        f"User {user_id} asked: can I get a refund for my subscription now? Check the profile, "
        "the billing and the refund policy with the tools, then answer in one short English "
        "sentence that starts with Yes or No and gives the USD amount and the reason."
    )


def tools(_workdir: Path) -> list[BaseTool]:
    """The three support tools; they keep no files."""
    return list(SUPPORT_TOOLS)


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
)
