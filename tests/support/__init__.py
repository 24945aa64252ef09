"""What the tests share: hand-built states and scripted runs (helpers), fake tools, a scripted
chat-completions server, Postgres databases, child processes to kill, a `langgraph dev` server and
worker graphs. Nothing here is a test except ``test_pg.py``, which checks the Postgres helper."""
