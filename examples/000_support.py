"""Seed 000, the support refund gateway: JSON actions through the policy gate.

    python examples/000_support.py                       # all scenarios, scripted model
    python examples/000_support.py --scenario user-7     # one of them
    OPENAI_API_KEY=... python examples/000_support.py    # the main run on a real model

Scripted, it runs user 42 (yes, USD 49), user 7 (no), and the seed's experiments: search_policy
off the allowlist (tool_denied:search_policy), max_tool_calls=1 (max_tool_calls), a made-up tool
(tool_missing:issue_refund) and normalized loop detection (loop_detected).

The example (goal, policy, tools) is gated_react.examples.support, the same one
`gated-react run --example 000-support` runs; its scripted replies and expected outcomes are in
examples/scenarios/support.py.
"""

import sys

from scenarios import runner, support

if __name__ == "__main__":
    sys.exit(runner.main(support.SEED, script="examples/000_support.py"))
