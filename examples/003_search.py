"""Seed 003, search and calculate: ReAct text with format retries and per-tool timeouts.

    python examples/003_search.py                        # all scenarios, scripted model
    OPENAI_API_KEY=... python examples/003_search.py     # the main run on a real model

A deterministic search over a small shipped corpus and the AST calculator answer "Beijing's high
today plus 100" (31 + 100 = 131). A reply without an Action line gets a format reminder; a slow
service hits its timeout and the model carries on (on_tool_error="observe") or the run stops
(the default), as the policy says. The definitions are in
src/gated_react/examples/search_calculate.py.
"""

import sys

from gated_react.examples.runner import main

if __name__ == "__main__":
    sys.exit(main("003-search", script="examples/003_search.py"))
