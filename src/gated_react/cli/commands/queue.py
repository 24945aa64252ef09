"""``gated-react queue``: the workers' jobs in a Postgres store, by thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from gated_react.cli import filters, flags, resources
from gated_react.cli.live import render

if TYPE_CHECKING:
    from gated_react.records.queue_listing import JobRow

_HEADS = ("thread", "job", "kind", "status", "attempts", "worker", "since")
_COLOR = {"queued": "cyan", "running": "yellow", "failed": "red", "succeeded": "green"}


def queue_command(
    thread: Annotated[
        str | None,
        typer.Option(
            "--thread", metavar="THREAD", help="Only this thread's jobs.", show_default=False
        ),
    ] = None,
    everything: Annotated[
        bool, typer.Option("--all", help="Also the jobs that simply succeeded.")
    ] = False,
    limit: Annotated[
        int, typer.Option(min=1, max=filters.MAX_LISTED, metavar="N", help="How many jobs to list.")
    ] = 200,
    db: flags.Db = None,
    json_out: flags.Json = False,
) -> None:
    """List the workers' queue: queued, running (which worker, since when), failed and retried
    jobs, per thread."""
    from gated_react.records.queue_listing import queue_jobs

    config = resources.settings()
    url = resources.store_url(config, db)
    target = resources.fleet_store(url)
    jobs, counts = queue_jobs(target, thread=thread, everything=everything, limit=limit)
    secrets = config.secrets()
    if json_out:
        render.print_json({"counts": counts, "jobs": [job.as_json() for job in jobs]}, secrets)
        return
    console = render.console()
    totals = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no jobs"
    if jobs:
        cells = [_cells(job, secrets) for job in jobs]
        widths = render.widths(_HEADS, cells)
        console.print(render.row_line(list(_HEADS), widths[:-1], "bold"), soft_wrap=True)
        for job, cell in zip(jobs, cells, strict=True):
            console.print(
                render.row_line(cell, widths[:-1], _COLOR.get(job.status, ""), 3), soft_wrap=True
            )
    where = render.safe(resources.shown(url))
    if thread is not None and not jobs:  # the totals are the whole queue's, not the thread's
        console.print(f"no jobs of thread {render.safe(thread)}", soft_wrap=True)
    console.print(f"[dim]{escape(totals)} in {where}[/]", soft_wrap=True)


def _cells(job: JobRow, secrets: tuple[str, ...]) -> list[str]:
    """Plain text cells (``render.row_line`` escapes them after padding)."""
    if job.status == "running":
        worker = f"{job.worker_id} (beat {job.heartbeat or '?'})"
        since = job.started
    else:
        worker = "-" if job.worker_id is None else str(job.worker_id)
        since = job.ended if job.status in ("failed", "succeeded") else job.queued
    status = job.status if not job.retries else f"{job.status} (retried {job.retries}x)"
    values = [str(job.job), job.kind, status, str(job.attempts), worker, since or "-"]
    return [render.ident(job.thread, secrets), *(render.plain(v, secrets) for v in values)]
