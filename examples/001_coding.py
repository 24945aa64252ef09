"""Seed 001, the coding agent: ReAct text with tool[argument] and finish[answer].

    python examples/001_coding.py                        # all scenarios, scripted model
    OPENAI_API_KEY=... python examples/001_coding.py     # the main run on a real model

Every run works on a fresh copy of a small sample project whose test fails
(src/gated_react/examples/files/cart_project). The agent calls run_tests[tests/test_cart.py]
and read_file[src/cart.py], then names the cause with finish[...]. The workspace tools refuse
any path outside the copy; with on_tool_error="observe" the model reads the refusal and goes
on.

The example (goal, policy, tools) is gated_react.examples.coding, the same one
`gated-react run --example 001-coding` runs; its scripted replies and expected outcomes are in
examples/scenarios/coding.py.
"""

import sys

from scenarios import coding, runner

if __name__ == "__main__":
    sys.exit(runner.main(coding.SEED, script="examples/001_coding.py"))
