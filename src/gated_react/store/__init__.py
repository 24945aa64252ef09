"""What opens and guards the store a run persists to: the checkpointers (``checkpointer``),
the savers the LangGraph server needs (``savers``), the one serializer that revives only the
state's types (``serializer``), the signing saver (``signed``) and its key (``key``), and the
one advancer per thread (``locks``).

Nothing is imported here: ``gated_react.store.checkpointer`` and the rest load on first import,
so the CLI's listing commands pay only for what they open. The public names are re-exported by
``gated_react`` itself.
"""
