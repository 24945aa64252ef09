"""``gated-react show THREAD``: one run's history, trace and logged events."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gated_react.cli import flags, resources
from gated_react.cli.exits import user_errors
from gated_react.cli.live import render
from gated_react.cli.live.events import clip
from gated_react.cli.live.run_log import read_events


def show_command(
    thread: Annotated[
        str, typer.Argument(help="The run's thread id.", show_default=False, metavar="THREAD")
    ],
    db: flags.Db = None,
    json_out: flags.Json = False,
    log: flags.Log = None,
    no_log: flags.NoLog = False,
) -> None:
    """Show a run: summary, history (tool steps), trace (every gated call) and its run log."""
    from gated_react.runs import read

    config = resources.settings()
    url = resources.store_url(config, db)
    with resources.opened(url) as saver, user_errors():
        result = read(resources.reader_graph(saver), thread)
        found = saver.get_tuple({"configurable": {"thread_id": thread}})
    events = read_events(resources.log_path(url, log, no_log), thread)
    secrets = config.secrets()
    if json_out:
        render.print_json({**result, "events": events}, secrets)
        return
    from gated_react.cli.run_options import RunOptions

    options = RunOptions.from_metadata(found.metadata if found else None) or RunOptions()
    console = Console(highlight=False)
    console.print(f"[bold]goal[/]  {escape(clip(_goal(found), 300))}")
    render.summary(console, result, options.policy().budget, secrets)
    console.print(_history(result, console.width))
    console.print(_trace(result))
    if events:
        console.print(_events(events, console.width))
    if result.get("pending"):
        render.pending(console, result, f"gated-react resume {thread}")


def _goal(found: Any) -> str:
    values = found.checkpoint.get("channel_values", {}) if found else {}
    return str(values.get("goal", ""))


def _history(result: dict[str, Any], width: int) -> Table:
    rows, observations = [], []
    for entry in result.get("history") or ():
        action = entry.get("action", {})
        args = json.dumps(action.get("args"), ensure_ascii=False)
        rows.append([str(entry.get("step")), str(action.get("name")), clip(args, 40)])
        observations.append(entry.get("observation"))
    return _table(
        "history",
        heads=("step", "tool", "args"),
        rows=rows,
        last="observation",
        values=observations,
        width=width,
    )


def _table(
    title: str,
    *,
    heads: tuple[str, ...],
    rows: list[list[str]],
    last: str,
    values: list[Any],
    width: int,
) -> Table:
    """Fixed columns sized to their content, then one column clipped to the room left."""
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    sizes = [max([len(head), *(len(row[i]) for row in rows)]) for i, head in enumerate(heads)]
    for head, size in zip(heads, sizes, strict=True):
        table.add_column(head, no_wrap=True, min_width=size)
    table.add_column(last, no_wrap=True)
    room = max(width - sum(sizes) - 2 * len(heads) - 2, 20)
    for row, value in zip(rows, values, strict=True):
        table.add_row(*(escape(cell) for cell in row), escape(clip(value or "", room)))
    return table


def _trace(result: dict[str, Any]) -> Table:
    table = Table(title="trace", title_justify="left", box=None, header_style="bold")
    for name in ("step", "tool", "args hash", "ok", "error / stop reason"):
        table.add_column(name)
    for entry in result.get("trace") or ():
        table.add_row(
            str(entry.get("step")),
            escape(str(entry.get("tool"))),
            str(entry.get("args_hash")),
            "yes" if entry.get("ok") else "[red]no[/]",
            escape(str(entry.get("stop_reason") or entry.get("error") or "")),
        )
    return table


def _events(events: list[dict[str, Any]], width: int) -> Table:
    heads = ("time", "step", "node", "decision", "stop reason", "tokens")
    rows = [
        [
            str(event.get("time", ""))[11:23],
            str(event.get("step", "")),
            str(event.get("node", "")),
            str(event.get("decision") or ""),
            str(event.get("stop_reason") or ""),
            str(event.get("tokens", "")),
        ]
        for event in events
    ]
    actions = [event.get("action") for event in events]
    return _table("run log", heads=heads, rows=rows, last="action", values=actions, width=width)
