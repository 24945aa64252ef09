"""``gated_react.tools``: the public home of the idempotent marker, and toolkits by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.tools import tool

from gated_react.policy import Policy
from gated_react.tools import TOOLKITS, idempotent, load_toolkit, toolkit_timeouts
from gated_react.tools._meta import idempotent as implementation
from gated_react.tools.workspace import TEST_TIMEOUT_SECONDS


def test_the_idempotent_marker_is_importable_from_the_package() -> None:
    assert idempotent is implementation

    @idempotent
    @tool
    def charge(amount: int) -> str:
        """Charges an amount (safe to repeat: the provider deduplicates)."""
        return "ok"

    assert charge.metadata == {"idempotent": True}


def test_the_marker_keeps_other_metadata() -> None:
    @tool
    def ping() -> str:
        """Pings."""
        return "pong"

    ping.metadata = {"owner": "ops"}
    assert idempotent(ping).metadata == {"owner": "ops", "idempotent": True}


def test_every_named_toolkit_loads(tmp_path: Path) -> None:
    database = tmp_path / "empty.sqlite"
    database.touch()
    for name in TOOLKITS:
        tools = load_toolkit(name, root=tmp_path, database=database)
        assert tools, name


def test_an_unknown_toolkit_is_one_line_naming_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown toolkit 'billing'; choose from support, "):
        load_toolkit("billing")


def test_toolkit_timeouts_outlast_the_tools_own_limits_unless_the_policy_names_them() -> None:
    assert toolkit_timeouts(["support", "sql"]) == {}
    assert list(toolkit_timeouts(["workspace"])) == ["run_tests"]
    assert toolkit_timeouts(["workspace"])["run_tests"] > TEST_TIMEOUT_SECONDS
    slow = Policy(tool_timeout_seconds=600, tool_timeouts={"calculate": 1.0})
    assert toolkit_timeouts(["workspace"], slow) == {"calculate": 1.0, "run_tests": 600}
    named = Policy(tool_timeouts={"run_tests": 5.0})
    assert toolkit_timeouts(["workspace"], named) == {"run_tests": 5.0}
