"""``gated-react run GOAL``: one goal, start to end, watched node by node."""

from __future__ import annotations

import contextlib
import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gated_react.cli import flags, resources
from gated_react.cli.exits import CliError, Exit, user_errors
from gated_react.cli.live.session import Place, Session, logged
from gated_react.cli.model_source import model_for_run
from gated_react.records.described import clip
from gated_react.records.events import Tracker
from gated_react.records.store import readable
from gated_react.redact import redact

if TYPE_CHECKING:
    from gated_react.cli.run_options import RunOptions


@flags.with_run_options
def run_command(
    goal: Annotated[
        str | None,
        typer.Argument(
            help="The task, in your own words (optional with --example).",
            show_default=False,
            metavar="GOAL",
        ),
    ] = None,
    *,
    thread: flags.NewThread = None,
    db: flags.Db = None,
    model: flags.Model = None,
    base_url: flags.BaseUrl = None,
    json_out: flags.Json = False,
    log: flags.Log = None,
    no_log: flags.NoLog = False,
    given: dict[str, Any],
) -> None:
    """Run one goal; exit 0 success, 2 policy stop, 3 model/tool failure, 4 paused, 130 Ctrl-C."""
    example = given["example"]
    for flag, name in (("--toolkit", "toolkit"), ("--mcp", "mcp")):
        if example and given[name]:
            raise CliError(f"use --example or {flag}, not both (an example brings its own tools)")
    if example:
        goal = goal or _example_goal(example)
    if goal is None:
        raise CliError("missing GOAL: say what the agent should do (or run a seed with --example)")
    if not goal.strip():
        raise CliError("the goal is empty; say what the agent should do")
    thread = flags.new_thread(thread)
    from gated_react.cli.model_source import uses_local
    from gated_react.cli.run_options import RunOptions

    options = RunOptions.given(
        given,
        local=uses_local(resources.settings(), base_url),
        example_dir=str(example_dir(thread)) if example else None,
        model=model,
        base_url=base_url,
    )
    place = Place(db=db, log=log, no_log=no_log, json_out=json_out, again=options.flags())
    code = _run(goal, options, thread, place, base_url)
    if code:
        raise typer.Exit(int(code))


def _run(goal: str, options: RunOptions, thread: str, place: Place, base_url: str | None) -> Exit:
    from gated_react.cli.run_options import close_mcp

    config = resources.settings()
    with contextlib.ExitStack() as stack:
        stack.callback(close_mcp)  # MCP servers are the run's children: none outlives it
        options.tools()  # unknown toolkits and tool names fail before anything else starts
        url = resources.store_url(config, place.db)
        with user_errors():  # no model configured, local model missing: one line, nothing made
            model = stack.enter_context(
                model_for_run(
                    config, model=options.model, base_url=base_url, model_file=options.model_file
                )
            )
        saver = stack.enter_context(resources.opened(url))
        runlog = stack.enter_context(logged(url, place, config))
        refuse_existing(saver, thread)
        graph = resources.graph_for(options, model.chat, saver)
        budget = options.budget()
        session = Session(Tracker(thread, saver), budget, runlog, config.secrets(), place)
        session.header(model.label, url)
        session.note("started", action={"goal": clip(redact(goal, *config.secrets()), 200)})
        from gated_react.runs import run

        result = session.drive(lambda watch: run(graph, goal, thread_id=thread, on_update=watch))
        return session.finish(result)


def _example_goal(name: str) -> str:
    from gated_react import examples

    try:
        return examples.get(name).goal
    except examples.UnknownExample as exc:
        raise CliError(str(exc)) from None


# A thread id used as a folder name as it is: letters, digits, dot, dash, underscore, not
# leading with a dot (no "..", no hidden folder), short enough for any file system.
_FOLDER_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")


def example_dir(thread: str) -> Path:
    """Each example run works on its own copy of the example's files, kept for ``resume`` (which
    finds it in the run's recorded options), always inside the state folder."""
    from gated_react.settings import default_state_dir

    return default_state_dir() / "examples" / _example_folder(thread)


def _example_folder(thread: str) -> str:
    """The folder name for a thread's example files: the thread id when it is a plain name;
    else a readable part of it, ``~`` (never in a plain name, so the two never collide) and a
    hash of all of it: "../x" or "/etc" is never a path."""
    if _FOLDER_NAME.fullmatch(thread):
        return thread
    digest = hashlib.sha256(thread.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    readable_part = re.sub(r"[^A-Za-z0-9_-]+", "-", thread).strip("-")[:40]
    return f"{readable_part}~{digest}"


def refuse_existing(saver: object, thread_id: str) -> None:
    from gated_react.runs import ThreadExists, config_for

    get_tuple = getattr(saver, "get_tuple", None)
    with readable(thread_id):
        taken = get_tuple is not None and get_tuple(config_for(thread_id)) is not None
    if taken:
        raise CliError(str(ThreadExists(thread_id)))
