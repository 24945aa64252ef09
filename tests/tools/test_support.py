from __future__ import annotations

from gated_react.tools.support import (
    SUPPORT_TOOLS,
    get_user_billing,
    get_user_profile,
    search_policy,
)


def test_the_scenario_data() -> None:
    assert get_user_profile.invoke({"user_id": 42})["user"]["name"] == "Anna"
    assert get_user_profile.invoke({"user_id": 7})["user"]["tier"] == "free"
    assert get_user_billing.invoke({"user_id": 42})["billing"]["price_usd"] == 49.0
    assert get_user_billing.invoke({"user_id": 7})["billing"]["days_since_first_payment"] == 120
    assert "not found" in get_user_profile.invoke({"user_id": 99})["error"]


def test_search_ranks_policies_and_never_returns_nothing() -> None:
    assert search_policy.invoke({"query": "refund pro monthly"})["matches"][0]["id"] == "refund-v3"
    assert search_policy.invoke({"query": "free plan"})["matches"][0]["id"] == "free-v1"
    assert len(search_policy.invoke({"query": "zzz"})["matches"]) == 1


def test_read_only_tools_declare_themselves_idempotent() -> None:
    assert all((t.metadata or {}).get("idempotent") is True for t in SUPPORT_TOOLS)
