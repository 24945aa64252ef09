"""The ``gated-react`` command line: run, resume, list and show runs, and draw the graph.

Only typer and rich load at start; LangGraph, LangChain and the OpenAI client load inside the
commands that need them, so ``gated-react --help`` and ``gated-react runs`` stay quick.
"""

from __future__ import annotations


def main() -> None:
    """Console-script entry point."""
    from gated_react.cli.app import app

    app(prog_name="gated-react")
