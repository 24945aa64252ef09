"""Options shared by several commands (typer ``Annotated`` aliases)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gated_react.cli.exits import CliError

if TYPE_CHECKING:
    from gated_react.records.windows import Window

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

# Which runs a listing or a prune takes: by status, and by when each was last updated.
Status = Annotated[
    list[str] | None,
    typer.Option(
        "--status",
        metavar="STATUS",
        help="Only runs with this status (repeat for several): ok, stopped, paused, unfinished, "
        "unsigned, unverified, keyed.",
        show_default=False,
    ),
]
Since = Annotated[
    str | None,
    typer.Option(
        "--since",
        metavar="AGE|DATE",
        help="Only runs updated since then: an age (2d, 12h) or a date (2026-11-30).",
        show_default=False,
    ),
]
Before = Annotated[
    str | None,
    typer.Option(
        "--before",
        metavar="AGE|DATE",
        help="Only runs last updated before then: an age (30d) or a date (2026-11-30).",
        show_default=False,
    ),
]


def window(since: str | None, before: str | None) -> Window:
    """The window ``--since`` and ``--before`` name; a bad age or date is one line."""
    from gated_react.records.windows import Window, parse_moment

    try:
        start = None if since is None else parse_moment(since)
        end = None if before is None else parse_moment(before)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return Window(start, end)


def statuses(given: list[str] | None) -> tuple[str, ...]:
    """The ``--status`` values, each checked."""
    from gated_react.records.run_listing import STATUSES

    unknown = [value for value in given or () if value not in STATUSES]
    if unknown:
        raise CliError(f"unknown status {unknown[0]!r}; choose from {', '.join(STATUSES)}")
    return tuple(dict.fromkeys(given or ()))


def described(shown: Window) -> str:
    """The window as words after "runs" (" since 2026-12-01 10:00"); empty when it is open."""
    words = ""
    if shown.since is not None:
        words += f" since {shown.since.astimezone():%Y-%m-%d %H:%M}"
    if shown.before is not None:
        words += f" before {shown.before.astimezone():%Y-%m-%d %H:%M}"
    return words
