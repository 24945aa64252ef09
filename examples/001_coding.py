"""Seed 001, the coding agent: ReAct text with tool[argument] and finish[answer].

    python examples/001_coding.py                        # all scenarios, scripted model
    OPENAI_API_KEY=... python examples/001_coding.py     # the main run on a real model

Every run works on a fresh copy of a small sample project whose test fails
(src/gated_react/examples/files/cart_project). The agent calls run_tests[tests/test_cart.py]
and read_file[src/cart.py], then names the cause with finish[...]. The workspace tools refuse
any path outside the copy; with on_tool_error="observe" the model reads the refusal and goes
on. The definitions are in src/gated_react/examples/coding.py.
"""

import sys

from gated_react.examples.runner import main

if __name__ == "__main__":
    sys.exit(main("001-coding", script="examples/001_coding.py"))
