"""``gated-react enqueue GOAL``: a run queued for the workers, its thread id printed.

The job carries the goal, the thread and the run's LangGraph context, nothing else: the tools,
the policy and the model are the workers' (their graph factory). A queue row is not signed, so
nothing in it may choose what runs.
"""

from __future__ import annotations

import shlex
import sys
from typing import Annotated

import typer

from gated_react.cli import flags, resources
from gated_react.cli.answers import json_object
from gated_react.cli.exits import CliError, user_errors
from gated_react.cli.live import render
from gated_react.errors import printable


def enqueue_command(
    goal: Annotated[
        str, typer.Argument(help="The task, in your own words.", show_default=False, metavar="GOAL")
    ],
    *,
    thread: flags.NewThread = None,
    context: Annotated[
        str | None,
        typer.Option(
            help="The run's LangGraph context, a JSON object (what its tools read as "
            "ToolRuntime.context)",
            metavar="JSON",
            show_default=False,
        ),
    ] = None,
    db: flags.Db = None,
    json_out: flags.Json = False,
) -> None:
    """Queue a run for the workers (Postgres store); print its thread id."""
    if not goal.strip():
        raise CliError("the goal is empty; say what the agent should do")
    thread = flags.new_thread(thread)
    given = None if context is None else json_object("--context", context)
    config = resources.settings()
    url = resources.store_url(config, db)
    resources.fleet_store(url)
    _refuse_taken(url, thread)
    _enqueue(url, goal, thread, given)
    if json_out:
        render.print_json({"thread_id": thread, "queued": True}, config.secrets())
        return
    sys.stdout.write(f"{printable(thread)}\n")
    where, typed = resources.shown(url), shlex.quote(thread)  # as a person types it back
    store = f" --db {shlex.quote(where)}" if db else ""  # the store the commands must read
    sys.stderr.write(
        printable(
            f"queued for the workers in {where}; its jobs: gated-react queue --thread "
            f"{typed}{store}; its run: gated-react show {typed}{store}"
        )
        + "\n"
    )


def _refuse_taken(url: str, thread: str) -> None:
    """A thread with a run or a job already: the goal would be dropped (its job would continue
    that run), so it is refused as ``run --thread`` refuses it."""
    from gated_react.cli.commands.run import refuse_existing
    from gated_react.records.queue_listing import owned_by_fleet
    from gated_react.store.checkpointer import StoreURL

    with resources.opened(url) as saver:
        refuse_existing(saver, thread)
    if owned_by_fleet(StoreURL.parse(url).target, thread):
        raise CliError(
            f"thread {thread!r} has jobs in the queue already (gated-react queue --thread "
            f"{shlex.quote(thread)}); give another --thread"
        )


def _enqueue(url: str, goal: str, thread: str, context: dict[str, object] | None) -> None:
    from procrastinate.exceptions import ProcrastinateException

    from gated_react.errors import exception_line
    from gated_react.records.queue import client_app, enqueue_run, install_queue

    with user_errors():  # a store that cannot be reached: one line
        install_queue(url)
    app = client_app(url)
    try:
        with app.open():
            enqueue_run(app, goal, thread_id=thread, context=context)
    except ProcrastinateException as exc:
        raise CliError(f"cannot queue the run: {exception_line(exc, first_only=True)}") from None
