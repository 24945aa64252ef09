"""``gated-react show THREAD``: one run's history, trace and logged events."""

from __future__ import annotations

import json
import shlex
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gated_react.cli import flags, resources
from gated_react.cli.exits import CliError, user_errors
from gated_react.cli.live import render
from gated_react.cli.live.session import Result
from gated_react.policy import Budget
from gated_react.records.run_log import merged, read_events, stored_events
from gated_react.records.store import readable
from gated_react.store.signed import key_of

Secrets = tuple[str, ...]


def show_command(
    thread: flags.Thread,
    db: flags.Db = None,
    json_out: flags.Json = False,
    log: flags.Log = None,
    no_log: flags.NoLog = False,
) -> None:
    """Show a run: summary, history (tool steps), trace (every gated call) and its run log;
    the trace and usage are the run's record."""
    from gated_react.records.run_listing import advancing, goal_of
    from gated_react.runs import read, run_book

    config = resources.settings()
    url = resources.store_url(config, db)
    with resources.opened(url, create=False) as saver, user_errors(), readable(thread):
        found = saver.get_tuple({"configurable": {"thread_id": thread}})
        metadata = found.metadata if found else None
        fleet = _of_the_workers(url, thread)
        if found is None and fleet:
            raise CliError(
                f"thread {thread!r} has no run stored yet: its job waits in the workers' queue "
                f"(gated-react queue --thread {render.shell_word(thread)})"
            )
        result = read(resources.reader_graph(saver), thread)
        values = found.checkpoint.get("channel_values") if found else None
        goal = goal_of(result, values if isinstance(values, dict) else None)
        if not result["status"] and not result["pending"]:  # as ``runs`` lists it
            listed = "running" if advancing(saver, thread) else "unfinished"
            result["status"] = listed  # type: ignore[typeddict-item]
        tally = run_book(saver, thread).tally
        opened, doubted = tally.opened, tally.doubted
        context = None if opened is None else dict(opened.body)
        budget = resources.run_budget(saver, thread, metadata)
        stored = [] if no_log else stored_events(saver, thread)  # logged there by workers
        keyed = key_of(saver) is not None
    logged = resources.log_path(url, log, no_log), resources.shared_log(url, log, no_log)
    events = merged(*(read_events(path, thread) for path in logged), stored)
    secrets = config.secrets()
    if json_out:
        render.print_json({**result, "goal": goal, "run_context": context, "events": events},
                          secrets)  # fmt: skip
        return
    console = render.console()
    with readable(thread):  # stored values of the wrong shape fail here, not in read()
        console.print(f"[bold]goal[/]  {render.safe(goal, secrets, limit=300)}")
        if context is not None:
            console.print(_context(context, secrets), highlight=False)
        _print(console, result, budget=budget, events=events, secrets=secrets)
        if doubted is not None:  # what is shown may be lower than what was spent
            console.print(f"[bold red]spend in doubt:[/] {render.safe(doubted, secrets)}",
                          soft_wrap=True)  # fmt: skip
        if result.get("pending"):
            if fleet:  # answered through the workers' queue, never resumed here
                answer = [
                    "gated-react",
                    "answer",
                    thread,
                    *(["--db", resources.shown(db)] if db else []),
                ]
                render.pending(console, result, render.shell_join(answer), secrets)
            else:
                _resume_hint(console, result, thread, metadata, secrets, keyed=keyed)


def _print(
    console: Console,
    result: Result,
    *,
    budget: Budget,
    events: list[dict[str, Any]],
    secrets: Secrets,
) -> None:
    render.summary(console, result, budget, secrets)
    console.print(_history(result, console.width, secrets))
    console.print(_trace(result, secrets))
    if events:
        console.print(_events(events, console.width, secrets))


def _of_the_workers(url: str, thread: str) -> bool:
    """The thread has a job in a Postgres store's queue: the workers run it."""
    from gated_react.records.queue_listing import owned_by_fleet
    from gated_react.store.checkpointer import StoreURL

    store = StoreURL.parse(url)
    return store.kind == "postgres" and owned_by_fleet(store.target, thread)


def _resume_hint(
    console: Console, result: Result, thread: str, metadata: Any, secrets: Secrets, *, keyed: bool
) -> None:
    """How to answer: ``resume`` with the run's options given again. Those its checkpoints say
    it was started with are put in the commands only when a store key vouches for them:
    without one, whoever can write the store chooses them (an MCP config whose command runs,
    an approval dropped), so they are shown apart, to be checked, and the commands say
    OPTIONS."""
    from gated_react.cli.run_options import recorded

    said = recorded(metadata)
    if said is None:  # a program's or a server's thread: answered there, not by this CLI
        from gated_react.cli.commands.resume import answered_elsewhere
        from gated_react.records.run_listing import started_by

        render.pending(console, result, None, secrets)
        assistant = (metadata or {}).get("assistant_id")
        elsewhere = answered_elsewhere(started_by(metadata), thread, assistant)
        console.print(render.safe(elsewhere, secrets), soft_wrap=True, highlight=False)
        return
    flags = said.flags() if keyed else ["OPTIONS"]
    command = ["gated-react", "resume", thread, *flags]
    if said is not None and not keyed:
        given = render.safe(shlex.join(said.flags()) or "no options", secrets)
        console.print(
            f"[bold]started with[/] {given}  (as its checkpoints say; the store has no key, so "
            "anyone who can write it could have changed them: check them before giving them "
            "again)",
            soft_wrap=True,
        )
    render.pending(console, result, render.shell_join(command), secrets)


def _context(context: dict[str, Any], secrets: Secrets) -> Table:
    """Model, base URL, protocol, policy hash, pricing and version, as the run recorded them."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    model = f"{context.get('model')} ({context.get('model_class')})"
    rows = [
        ("model", model),
        ("base url", context.get("base_url") or "-"),
        ("protocol", context.get("protocol")),
        ("policy", context.get("policy_hash")),
        ("priced by", context.get("priced_by") or "unpriced"),
        ("version", context.get("version")),
    ]
    for key, value in rows:
        table.add_row(key, render.safe(str(value), secrets))
    return table


def _history(result: Result, width: int, secrets: Secrets) -> Table:
    rows, observations = [], []
    for entry in result.get("history") or ():
        action = entry.get("action", {})
        args = json.dumps(action.get("args"), ensure_ascii=False, default=str)
        step, tool = render.plain(str(entry.get("step"))), render.plain(str(action.get("name")))
        rows.append([step, tool, render.plain(args, secrets, limit=40)])
        observations.append(entry.get("observation"))
    return _table(
        "history",
        heads=("step", "tool", "args"),
        rows=rows,
        last="observation",
        values=observations,
        width=width,
        secrets=secrets,
    )


def _table(
    title: str,
    *,
    heads: tuple[str, ...],
    rows: list[list[str]],
    last: str,
    values: list[Any],
    width: int,
    secrets: Secrets,
) -> Table:
    """Fixed columns sized to their content, then one column clipped to the room left.

    ``rows`` hold text already made ``render.plain``; ``values`` are raw and made safe here."""
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    sizes = [max([len(head), *(len(row[i]) for row in rows)]) for i, head in enumerate(heads)]
    for head, size in zip(heads, sizes, strict=True):
        table.add_column(head, no_wrap=True, min_width=size)
    table.add_column(last, no_wrap=True)
    room = max(width - sum(sizes) - 2 * len(heads) - 2, 20)
    for row, value in zip(rows, values, strict=True):
        last_cell = render.safe(value or "", secrets, limit=room)
        table.add_row(*(escape(cell) for cell in row), last_cell)
    return table


def _trace(result: Result, secrets: Secrets) -> Table:
    table = Table(title="trace", title_justify="left", box=None, header_style="bold")
    for name in ("step", "tool", "args hash", "ok", "error / stop reason"):
        table.add_column(name)
    for entry in result.get("trace") or ():
        why = entry.get("stop_reason") or entry.get("error") or entry.get("extended") or ""
        table.add_row(
            render.safe(str(entry.get("step")), secrets),
            render.safe(str(entry.get("tool")), secrets),
            render.safe(str(entry.get("args_hash")), secrets),
            "yes" if entry.get("ok") else "[red]no[/]",
            render.safe(str(why), secrets),
        )
    return table


def _dollars(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else ""


def _events(events: list[dict[str, Any]], width: int, secrets: Secrets) -> Table:
    heads = ("time", "step", "node", "decision", "stop reason", "tokens", "cost")
    rows = [
        [
            render.plain(text, secrets)
            for text in (
                str(event.get("time", ""))[11:23],
                str(event.get("step", "")),
                str(event.get("node", "")),
                str(event.get("decision") or ""),
                str(event.get("stop_reason") or ""),
                str(event.get("tokens", "")),
                _dollars(event.get("cost")),
            )
        ]
        for event in events
    ]
    actions = [event.get("action") for event in events]
    return _table(
        "run log",
        heads=heads,
        rows=rows,
        last="action",
        values=actions,
        width=width,
        secrets=secrets,
    )
