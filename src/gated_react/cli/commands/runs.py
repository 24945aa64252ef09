"""``gated-react runs``: the latest threads in the store, by status and age if asked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from gated_react.cli import filters, flags, resources
from gated_react.cli.live import render

if TYPE_CHECKING:
    from gated_react.records.run_listing import RunRow

_COLOR = {
    "ok": "green",
    "stopped": "red",
    "paused": "yellow",
    "running": "cyan",
    "unfinished": "yellow",
    "unsigned": "yellow",
    "unverified": "red",
    "keyed": "yellow",
    "damaged": "red",
}
_HEADS = ("thread", "status", "stop reason", "steps", "cost", "updated")


def runs_command(
    *,
    limit: Annotated[
        int,
        typer.Option(min=1, max=filters.MAX_LISTED, metavar="N", help="How many threads to list."),
    ] = 20,
    status: filters.Status = None,
    since: filters.Since = None,
    before: filters.Before = None,
    db: flags.Db = None,
    json_out: flags.Json = False,
) -> None:
    """List the most recently updated runs: status, stop reason, steps, cost (USD), last update."""
    from gated_react.records.run_listing import latest_runs

    config = resources.settings()
    url = resources.store_url(config, db)
    secrets = config.secrets()
    window, statuses = filters.window(since, before), filters.statuses(status)

    rows: list[RunRow] = []  # no store there yet: no runs, and none is made
    total = 0
    if not resources.missing(url):
        with resources.opened(url) as saver:
            rows, total = latest_runs(saver, limit, window=window, statuses=statuses)
    if json_out:
        render.print_json({"total": total, "runs": [row.as_json() for row in rows]}, secrets)
        return
    console = render.console()
    where = render.safe(resources.shown(url))
    which = f" {'/'.join(statuses)}" if statuses else ""
    if not rows:
        console.print(f"{filters.none_found(statuses, window)} in {where}")
        return
    cells = [_cells(row, secrets) for row in rows]
    widths = render.widths(_HEADS, cells)
    room = max(console.width - sum(widths) - 2 * len(widths), 20)
    console.print(render.row_line([*_HEADS, "goal"], widths, "bold"), soft_wrap=True)
    for row, cell in zip(rows, cells, strict=True):
        goal = render.plain(row.problem or row.goal, secrets, limit=room)
        line = render.row_line([*cell, goal], widths, _COLOR.get(row.status, ""), 1)
        console.print(line, soft_wrap=True)
    counted = f"{len(rows)}{which} of {total} runs{filters.described(window)}"
    console.print(f"[dim]{render.safe(counted)} in {where}[/]", soft_wrap=True)


def _cells(row: RunRow, secrets: tuple[str, ...]) -> list[str]:
    """The fixed columns as plain text (``render.row_line`` escapes them after padding)."""
    cost = "-" if row.cost is None else f"{row.cost:.4f}"
    values = [row.status, row.stop_reason or "-", str(row.steps), cost, row.updated]
    return [render.ident(row.thread_id, secrets), *(render.plain(v, secrets) for v in values)]
