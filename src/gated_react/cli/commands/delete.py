"""``gated-react delete THREAD...`` and ``gated-react prune``: threads removed from everywhere
this package writes them (``records.places``: checkpoints and their writes, the run log's table,
the workers' queue; and the run log file and an example run's files), one by one or by age and
status."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from gated_react.cli import filters, flags, resources
from gated_react.cli.exits import CliError, user_errors
from gated_react.cli.live import render

_NAMED = 10  # threads named in an error line
_WOULD = ("thread", "status", "updated")  # the columns of prune --dry-run


@dataclass
class _Deleted:
    """What one delete or prune removed, thread by thread, and what it left."""

    removed: dict[str, dict[str, int]] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    """Threads not deleted, and why (busy, running, not found)."""


def delete_command(
    threads: Annotated[
        list[str], typer.Argument(help="The threads to delete.", metavar="THREAD...")
    ],
    *,
    db: flags.Db = None,
    log: flags.Log = None,
    json_out: flags.Json = False,
) -> None:
    """Delete threads everywhere they are kept: checkpoints, pending writes, run log lines (the
    store's and the log file's), the workers' queued jobs, an example run's files."""
    config = resources.settings()
    url = resources.store_url(config, db)
    done = _delete(url, list(dict.fromkeys(threads)), resources.log_path(url, log, False))
    _report(done, config.secrets(), json_out)
    if done.left:
        named = ", ".join(f"{t!r} ({why})" for t, why in list(done.left.items())[:_NAMED])
        more = f" and {len(done.left) - _NAMED} more" if len(done.left) > _NAMED else ""
        raise CliError(f"not deleted: {named}{more}")


def prune_command(
    *,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="AGE|DATE",
            help="Runs last updated before then: an age (30d, 12h) or a date (2026-11-30).",
            show_default=False,
        ),
    ] = None,
    status: filters.Status = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the runs that would be deleted; delete none.")
    ] = False,
    db: flags.Db = None,
    log: flags.Log = None,
    json_out: flags.Json = False,
) -> None:
    """Delete the runs last updated before --older-than and/or of a --status, everywhere they
    are kept (as delete does); --dry-run lists them."""
    from gated_react.records.run_listing import latest_runs

    if older_than is None and not status:
        raise CliError("prune needs --older-than AGE, --status STATUS or both")
    config = resources.settings()
    url = resources.store_url(config, db)
    window, statuses = filters.window(None, older_than), filters.statuses(status)
    with resources.opened(url, create=False) as saver:
        rows, _ = latest_runs(saver, None, window=window, statuses=statuses)
    secrets = config.secrets()
    if dry_run:
        _would(rows, secrets, json_out, resources.shown(url))
        return
    if not rows and not json_out:
        where = render.safe(resources.shown(url))
        said = f"nothing deleted: {filters.none_found(statuses, window)} in {where}"
        render.console().print(said, soft_wrap=True)
        return
    done = _delete(url, [row.thread_id for row in rows], resources.log_path(url, log, False))
    _report(done, secrets, json_out, skipped=True)  # prune them later: not an error


def _delete(url: str, threads: list[str], log: Path | None) -> _Deleted:
    from gated_react.records.places import forget
    from gated_react.records.run_log import forget_lines

    with resources.opened(url, create=False) as saver, user_errors():
        forgotten = forget(saver, threads)
    done = _Deleted(forgotten.removed, forgotten.left)
    for thread in threads:  # not in the store: perhaps in the log file, or an example's
        if thread not in done.left:
            done.removed.setdefault(thread, {})
    with user_errors():
        lines = forget_lines(log, list(done.removed))
    for thread in list(done.removed):
        removed = done.removed[thread]
        removed["run log file lines"] = lines.get(thread, 0)
        removed["example files"] = _remove_example(thread)
        done.removed[thread] = {what: n for what, n in removed.items() if n}
        if not done.removed[thread]:
            del done.removed[thread]
            done.left[thread] = "not in this store"
    done.removed = {thread: done.removed[thread] for thread in threads if thread in done.removed}
    done.left = {thread: done.left[thread] for thread in threads if thread in done.left}
    return done


def _remove_example(thread: str) -> int:
    """The copy of an example's files an ``--example`` run of ``thread`` worked on."""
    from gated_react.cli.commands.run import example_dir

    folder = example_dir(thread)
    if not folder.is_dir():
        return 0
    shutil.rmtree(folder)
    return 1


def _report(
    done: _Deleted, secrets: tuple[str, ...], json_out: bool, skipped: bool = False
) -> None:
    if json_out:
        render.print_json({"deleted": done.removed, "not_deleted": done.left}, secrets)
        return
    console = render.console()
    for thread, removed in done.removed.items():
        what = ", ".join(f"{n} {place}" for place, n in removed.items())
        console.print(f"deleted {render.safe(thread, secrets)}: {render.safe(what)}")
    for thread, why in done.left.items() if skipped else ():
        console.print(f"[yellow]skipped[/] {render.safe(thread, secrets)}: {render.safe(why)}")
    if not done.removed:
        console.print("nothing deleted")


def _would(rows: list[Any], secrets: tuple[str, ...], json_out: bool, where: str) -> None:
    """The runs prune would delete; a run another process advances now it would leave (as
    prune itself leaves it), and says so."""
    left = [row for row in rows if row.status == "running"]
    rows = [row for row in rows if row.status != "running"]
    if json_out:
        runs = [row.as_json() for row in rows]
        kept = {row.thread_id: "a run is advancing it" for row in left}
        render.print_json({"dry_run": True, "runs": runs, "left": kept}, secrets)
        return
    console = render.console()
    if rows:
        cells = [[render.ident(row.thread_id, secrets), render.plain(row.status),
                  render.plain(row.updated)] for row in rows]  # fmt: skip
        widths = render.widths(_WOULD, cells)
        console.print(render.row_line([*_WOULD, "goal"], widths, "bold"), soft_wrap=True)
        for row, cell in zip(rows, cells, strict=True):
            goal = render.plain(row.problem or row.goal, secrets, limit=60)
            console.print(render.row_line([*cell, goal], widths, ""), soft_wrap=True)
    console.print(f"{len(rows)} runs would be deleted from {render.safe(where)}", soft_wrap=True)
    for row in left:
        console.print(f"left: {render.safe(row.thread_id, secrets)}: a run is advancing it",
                      soft_wrap=True)  # fmt: skip
