"""``RunOptions``: the policy a command line gives a run, toolkit timeouts included."""

from __future__ import annotations

from pathlib import Path

import typer.main

from gated_react.cli.app import app
from gated_react.cli.flags import RUN_OPTIONS
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


def test_the_flags_said_for_a_resume_give_the_same_options_again(tmp_path: Path) -> None:
    """What a paused run prints (and a refused resume quotes) is a command line that builds
    exactly the run's options: nothing else carries them to the resume."""
    mcp = tmp_path / "mcp.json"
    options = RunOptions(
        toolkits=["sql", "calculator"],
        database=str(tmp_path / "shop.sqlite"),
        allow=["query_database"],
        approve=["query_database"],
        mcp=[str(mcp)],
        trust=["notes__delete_note"],
        max_steps=3,
        max_cost=0.25,
        max_seconds=1.5,
        on_budget="ask",
        protocol="json",
        model="gpt-x",
        base_url="http://127.0.0.1:9/v1",
    )
    command = typer.main.get_command(app).commands["resume"]  # type: ignore[attr-defined]
    parsed = command.make_context("resume", ["t", *options.flags()]).params
    given = {name: parsed[name] for name in RUN_OPTIONS}
    again = RunOptions.given(given, local=False, model=parsed["model"], base_url=parsed["base_url"])
    assert again == options
