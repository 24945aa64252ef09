"""Options shared by several commands (typer ``Annotated`` aliases)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Run store: a path, sqlite:///path, postgresql://... or memory "
        "[default: $GATED_REACT_DB, else runs.sqlite in the XDG state folder]",
        show_default=False,
    ),
]
Log = Annotated[
    Path | None,
    typer.Option(
        "--log",
        metavar="PATH",
        help="Run log (JSON lines) [default: next to the store, e.g. runs.sqlite.log]",
        show_default=False,
        dir_okay=False,
    ),
]
NoLog = Annotated[bool, typer.Option("--no-log", help="Write no run log.")]
Json = Annotated[
    bool, typer.Option("--json", help="Print only the result object as JSON on stdout.")
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model", metavar="NAME", help="Model name [default: $OPENAI_MODEL or gpt-4.1-mini]."
    ),
]
BaseUrl = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        metavar="URL",
        help="An OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 "
        "[default: $OPENAI_BASE_URL, else OpenAI]",
        show_default=False,
    ),
]
