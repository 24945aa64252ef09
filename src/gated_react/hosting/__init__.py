"""Setting up the places the graph is hosted, besides the command (``cli``) and the workers
(``workers``): the graphs and checkpointer LangGraph Studio serves (``studio``, named by
``langgraph.json``), the local llama.cpp model (``local``) and the OpenTelemetry SDK the
hosts install (``otel``).

Nothing is imported here: each module loads on first import, with its own extra.
"""
