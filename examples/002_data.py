"""Seed 002, the data agent: native tool calls, read-only SQL over a shipped SQLite file.

    python examples/002_data.py                          # all scenarios, scripted model
    OPENAI_API_KEY=... python examples/002_data.py       # the main run on a real model

The total of completed orders (11 orders, USD 1,414.50) is read from query_database and the
calculator, never from the model's head. An UPDATE is refused by the SQL tool itself, a made-up
tool becomes an observation listing the real ones, and a locked database is retried with
backoff (Policy.tool_retries).

The example (goal, policy, tools) is gated_react.examples.data_agent, the same one
`gated-react run --example 002-data` runs; its scripted replies and expected outcomes are in
examples/scenarios/data_agent.py.
"""

import sys

from scenarios import data_agent, runner

if __name__ == "__main__":
    sys.exit(runner.main(data_agent.SEED, script="examples/002_data.py"))
