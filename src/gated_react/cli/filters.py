"""Which runs a listing or a prune takes (``runs``, ``questions``, ``queue``, ``delete``): how
many, by status, and by when each was last updated; and what a filter that matched nothing
says."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from gated_react.cli.exits import CliError

if TYPE_CHECKING:
    from gated_react.records.windows import Window

MAX_LISTED = 1_000_000
"""The most a ``--limit`` asks for: more than any store lists at once, and inside the integers
SQLite and Postgres take (a larger one was their overflow error, or a traceback)."""

Status = Annotated[
    list[str] | None,
    typer.Option(
        "--status",
        metavar="STATUS",
        help="Only runs with this status (repeat for several): ok, stopped, paused, running, "
        "unfinished, unsigned, unverified, keyed, damaged.",
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


def none_found(statuses: tuple[str, ...], window: Window) -> str:
    """What a filter that matched nothing looked for ("no paused runs before 2026-12-01")."""
    which = f" {'/'.join(statuses)}" if statuses else ""
    return f"no{which} runs{described(window)}"


def described(shown: Window) -> str:
    """The window as words after "runs" (" since 2026-12-01 10:00"); empty when it is open."""
    words = ""
    if shown.since is not None:
        words += f" since {shown.since.astimezone():%Y-%m-%d %H:%M}"
    if shown.before is not None:
        words += f" before {shown.before.astimezone():%Y-%m-%d %H:%M}"
    return words
