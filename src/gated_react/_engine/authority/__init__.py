"""Whether a tool call may run, decided once and written down.

The gate writes a record for every call it lets through (a permit) or shows the model as
refused, for every model call paid, every budget a human extended and every run's end; execute
runs a call only under a valid permit, and a call that is not idempotent only after claiming
it (``started``) and closing it (``done``). The records live beside the checkpoints, where no
LangGraph state API writes (``ledger``), signed (``records``); budgets are summed from them
(``spend``), never from a channel a state editor can rewrite.
"""
