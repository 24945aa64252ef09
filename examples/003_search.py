"""Seed 003, search and calculate: ReAct text with format retries and per-tool timeouts.

    python examples/003_search.py                        # all scenarios, scripted model
    OPENAI_API_KEY=... python examples/003_search.py     # the main run on a real model

A deterministic search over a small shipped corpus and the AST calculator answer "Beijing's high
today plus 100" (31 + 100 = 131). A reply without an Action line gets a format reminder; a slow
service hits its timeout and the model carries on (on_tool_error="observe") or the run stops
(the default), as the policy says.

The example (goal, policy, tools) is gated_react.examples.search_calculate, the same one
`gated-react run --example 003-search` runs; its scripted replies and expected outcomes are in
examples/scenarios/search_calculate.py.
"""

import sys

from scenarios import runner, search_calculate

if __name__ == "__main__":
    sys.exit(runner.main(search_calculate.SEED, script="examples/003_search.py"))
