"""The refund scenario: two users, their billing, and three policy documents.

Anna (user 42) pays USD 49 a month for Pro and first paid 10 days ago: refundable (14-day window).
Max (user 7) is on the free plan: nothing to refund.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel, Field

from gated_react.tools._meta import idempotent

_USERS: dict[int, dict[str, Any]] = {
    42: {"id": 42, "name": "Anna", "country": "US", "tier": "pro"},
    7: {"id": 7, "name": "Max", "country": "US", "tier": "free"},
}
_BILLING: dict[int, dict[str, Any]] = {
    42: {
        "currency": "USD",
        "plan": "pro_monthly",
        "price_usd": 49.0,
        "days_since_first_payment": 10,
    },
    7: {"currency": "USD", "plan": "free", "price_usd": 0.0, "days_since_first_payment": 120},
}
_POLICIES: tuple[dict[str, str], ...] = (
    {
        "id": "refund-v3",
        "title": "Refund Policy",
        "snippet": (
            "Pro monthly subscriptions are refundable within 14 days from the first payment."
        ),
    },
    {
        "id": "free-v1",
        "title": "Free Plan Policy",
        "snippet": "Free plan has no billable payments and cannot be refunded.",
    },
    {
        "id": "billing-v2",
        "title": "Billing Rules",
        "snippet": "All refunds are returned to the original payment method in USD.",
    },
)


class UserArgs(BaseModel):
    user_id: int = Field(ge=1, le=1_000_000_000, description="The numeric user id, e.g. 42")


class QueryArgs(BaseModel):
    query: str = Field(
        min_length=1, max_length=200, description="Words to look for, e.g. 'refund pro'"
    )


@idempotent
@tool(args_schema=UserArgs)
def get_user_profile(user_id: int) -> dict[str, Any]:
    """Look up a user's profile (name, country, plan tier) by user id."""
    user = _USERS.get(user_id)
    return {"user": dict(user)} if user else {"error": f"user {user_id} not found"}


@idempotent
@tool(args_schema=UserArgs)
def get_user_billing(user_id: int) -> dict[str, Any]:
    """Look up a user's billing: plan, price in USD and days since the first payment."""
    billing = _BILLING.get(user_id)
    return (
        {"billing": dict(billing)}
        if billing
        else {"error": f"no billing record for user {user_id}"}
    )


@idempotent
@tool(args_schema=QueryArgs)
def search_policy(query: str) -> dict[str, Any]:
    """Search the refund, free-plan and billing policies; returns the best two matches."""
    words = set(re.findall(r"[a-z0-9]+", query.lower()))

    def score(doc: dict[str, str]) -> int:
        text = f"{doc['title']} {doc['snippet']}".lower()
        return sum(1 for word in words if word in text)  # "refund" also finds "refundable"

    ranked = sorted(_POLICIES, key=score, reverse=True)
    hits = [dict(doc) for doc in ranked if score(doc) > 0][:2]
    return {"matches": hits or [dict(_POLICIES[0])]}


SUPPORT_TOOLS: tuple[BaseTool, ...] = (get_user_profile, get_user_billing, search_policy)
