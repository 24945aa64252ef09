from __future__ import annotations

import math
import re
from typing import Any

import pytest
from langchain_core.tools import tool
from pydantic import ValidationError

from gated_react import Budget, Policy, Price, UnknownToolName, build_graph
from gated_react.policy import TOOL_NAME_FIELDS
from gated_react.state import Extension
from gated_react.testing import ScriptedChatModel


@tool
def refund(amount: int) -> str:
    """Refund an amount."""
    return "refunded"


@tool
def lookup_user(user_id: int) -> str:
    """Look a user up."""
    return "Ada"


def test_defaults_are_the_documented_ones() -> None:
    policy = Policy()
    assert policy.budget == Budget(max_steps=8, max_tool_calls=6, max_seconds=20)
    assert policy.allow is None
    assert policy.protocol == "tools"
    assert policy.loop_detection == "exact"
    assert (policy.context_steps, policy.context_keep) == (12, 1)
    assert policy.max_observation_chars == 4000
    assert policy.tool_timeout_seconds == 30
    assert policy.on_tool_error == "stop"
    assert policy.on_invalid_action == "stop"
    assert policy.max_invalid_retries == 2


def test_frozen_and_strict() -> None:
    policy = Policy()
    with pytest.raises(ValidationError):
        policy.protocol = "json"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        Policy(allowlist={"x"})  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Budget(max_steps=0)
    with pytest.raises(ValidationError, match=">= 0"):
        Budget(tool_limits={"x": -1})
    with pytest.raises(ValidationError):
        Policy(protocol="xml")  # type: ignore[arg-type]


def test_allowlist_narrows_registered_tools() -> None:
    registered = frozenset({"a", "b"})
    assert Policy().allowed(registered) == registered
    assert Policy(allow=frozenset({"a", "zzz"})).allowed(registered) == {"a"}
    assert Policy(tool_timeouts={"a": 1.5}).timeout_for("a") == 1.5
    assert Policy().timeout_for("a") == 30


def test_every_field_has_a_docstring() -> None:
    for model in (Policy, Budget):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"


def test_replace_takes_budget_fields_flat_beside_policy_fields() -> None:
    base = Policy(budget=Budget(max_steps=4, max_seconds=9), protocol="json")
    changed = base.replace(max_steps=2, on_tool_error="observe")
    assert changed.budget == Budget(max_steps=2, max_seconds=9)
    assert (changed.protocol, changed.on_tool_error) == ("json", "observe")
    assert base.budget.max_steps == 4  # frozen: the original is unchanged
    assert Policy().replace(max_tool_calls=1) == Policy(budget=Budget(max_tool_calls=1))
    assert Policy().replace(budget=Budget(max_steps=3)).budget.max_steps == 3


def test_replace_validates_like_the_constructor() -> None:
    with pytest.raises(ValidationError, match="max_stepz"):
        Policy().replace(max_stepz=3)
    with pytest.raises(ValidationError, match="max_steps"):
        Policy().replace(max_steps=0)
    with pytest.raises(ValidationError, match="protocol"):
        Policy().replace(protocol="xml")


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"require_approval": frozenset({"refnd"})}, "require_approval: refnd"),
        ({"allow": frozenset({"refund", "lookup_usr"})}, "allow: lookup_usr"),
        ({"budget": Budget(tool_limits={"refnd": 1})}, "budget.tool_limits: refnd"),
        ({"tool_timeouts": {"refnd": 1.0, "ghost": 2.0}}, "tool_timeouts: ghost, refnd"),
    ],
)
def test_build_graph_refuses_every_per_tool_name_that_is_not_a_tool(
    fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(UnknownToolName, match=re.escape(named)) as err:
        build_graph(ScriptedChatModel(replies=[]), [refund, lookup_user], policy=Policy(**fields))
    assert str(err.value).endswith("tools: lookup_user, refund")
    assert isinstance(err.value, ValueError)


def test_every_field_that_names_tools_is_checked() -> None:
    """Per-tool fields are the sets and maps keyed by name: a new one must be checked too."""
    fields = {**Policy.model_fields, **{f"budget.{k}": v for k, v in Budget.model_fields.items()}}
    keyed = {
        name
        for name, info in fields.items()
        if str(info.annotation).startswith("frozenset[str]")
        or "dict[str," in str(info.annotation)  # a map, or a word or a map
        or "collections.abc.Set[str]" in str(info.annotation)  # ToolNames
    }
    assert keyed - {"prices"} == set(TOOL_NAME_FIELDS)  # prices is keyed by model names


def test_tool_names_are_taken_as_sets_lists_or_tuples_and_kept_frozen() -> None:
    for names in ({"send_email"}, ["send_email"], ("send_email",), frozenset({"send_email"})):
        policy = Policy(require_approval=names, allow=names)
        assert policy.require_approval == policy.allow == frozenset({"send_email"})
        assert isinstance(policy.require_approval, frozenset)
    with pytest.raises(ValidationError, match="got one string 'send_email'"):
        Policy(require_approval="send_email")  # type: ignore[arg-type]


def test_the_limits_in_force_apply_each_extension_and_leave_the_budget_alone() -> None:
    budget = Budget(max_steps=2, tool_limits={"search": 1})

    def grant(key: str, limit: float) -> Extension:
        return Extension(budget=key, limit=limit, was=0, spent=0, decision="edit", step=1)

    grants = [grant("max_steps", 4), grant("tool_limit:search", 3), grant("max_steps", 9)]
    extended = budget.extended(grants)
    assert (extended.max_steps, extended.tool_limits) == (9, {"search": 3})
    assert (budget.max_steps, budget.tool_limits) == (2, {"search": 1})
    assert budget.extended([]) is budget


@pytest.mark.parametrize("field", ["input", "cached_input", "output"])
@pytest.mark.parametrize("bad", [math.inf, math.nan], ids=["inf", "nan"])
def test_prices_are_finite(field: str, bad: float) -> None:
    """Issue 28: ``Price(cached_input=inf)`` was taken; 0 tokens times inf is NaN and
    ``max_cost`` never bound."""
    fields: dict[str, float] = {"input": 1.0, "output": 1.0, field: bad}
    with pytest.raises(ValidationError, match=field):
        Price(**fields)


def test_approval_decisions_name_tools_under_approval_that_can_approve_and_reject() -> None:
    policy = Policy(
        require_approval={"pay"}, approval_decisions={"pay": ("reject", "edit", "approve")}
    )
    assert policy.decisions_for("pay") == ("approve", "edit", "reject")
    assert policy.decisions_for("other") == ("approve", "edit", "reject", "respond")
    with pytest.raises(ValidationError, match="not in require_approval: pay"):
        Policy(approval_decisions={"pay": ("approve", "reject")})
    with pytest.raises(ValidationError, match="pay: a human can always approve and reject"):
        Policy(require_approval={"pay"}, approval_decisions={"pay": ("approve", "edit")})
    with pytest.raises(ValidationError, match="Input should be 'approve', 'edit'"):
        Policy(require_approval={"pay"}, approval_decisions={"pay": ("approve", "reject", "x")})
    assert policy.unknown_tools({"lookup"}) == {
        "require_approval": ["pay"],
        "approval_decisions": ["pay"],
    }
