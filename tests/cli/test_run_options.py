"""``RunOptions``: the policy a command line gives a run, toolkit timeouts included."""

from __future__ import annotations

from gated_react.cli.run_options import RunOptions
from gated_react.policy import Policy
from gated_react.tools.workspace import TEST_TIMEOUT_SECONDS


def test_run_tests_gets_longer_than_its_own_sandbox_timeout() -> None:
    # Under the 30 s default, a suite its own 60 s limit allows stopped the run as tool_timeout.
    policy = RunOptions(toolkits=["workspace"]).policy()
    assert policy.timeout_for("run_tests") > TEST_TIMEOUT_SECONDS
    assert policy.timeout_for("read_file") == Policy().tool_timeout_seconds


def test_toolkits_without_slow_tools_keep_the_policy_timeouts() -> None:
    assert RunOptions(toolkits=["support", "calculator"]).policy().tool_timeouts == {}


def test_an_example_keeps_its_own_timeouts() -> None:
    example = RunOptions(example="001-coding").policy()
    assert example.timeout_for("run_tests") > TEST_TIMEOUT_SECONDS
    given = RunOptions(example="001-coding", toolkits=["support"]).policy()
    assert given.tool_timeouts == example.tool_timeouts
