"""Benchmarks: gated-react against LangChain's create_agent, LangGraph's create_react_agent and a
plain hand-written loop, measured side by side in one process run. ``python -m benchmarks``."""
