"""Options shared by several commands (typer ``Annotated`` aliases)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Thread = Annotated[
    str, typer.Argument(help="The run's thread id.", show_default=False, metavar="THREAD")
]
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

# The answers to a question (``resume``, ``answer``); ``resume.parse_answer`` reads them.
Approve = Annotated[bool, typer.Option("--approve", help="Approve the call the run waits on.")]
Reject = Annotated[
    str | None,
    typer.Option(
        "--reject", metavar="WHY", help="Reject the call, with the reason.", show_default=False
    ),
]
Args = Annotated[
    str | None,
    typer.Option(
        "--args", help="Approve with these arguments instead (a JSON object).", metavar="JSON"
    ),
]
Respond = Annotated[
    str | None,
    typer.Option(
        "--respond",
        metavar="TEXT",
        help="Answer in place of the tool: it does not run; TEXT is what the model sees.",
        show_default=False,
    ),
]
AnswerJson = Annotated[
    str | None,
    typer.Option(
        "--answer",
        metavar="JSON",
        help='Any answer the question takes, e.g. {"decisions": [{"type": "approve"}]}.',
        show_default=False,
    ),
]
