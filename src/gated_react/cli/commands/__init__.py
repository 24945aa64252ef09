"""One module per ``gated-react`` command, named as the command: run, resume, runs, show, graph.

Each imports LangGraph, LangChain and the model client inside the function that needs them.
"""
