"""Tests of the examples: the package's (package/) and the repository's scripts (scripts/)."""

import pytest

RUNNER_READS_INVOKE = pytest.mark.xfail(
    strict=True,
    reason="examples: scenarios/runner.run_scenario and the api scripts read history, trace, "
    "usage and answer from graph.invoke's result, which no longer has them "
    "(gated_react.run or result_of gives them)",
)
"""The tests that fail on the repository's examples/ folder, not yet moved to the new result."""
