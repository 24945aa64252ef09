"""``gated-react resume THREAD``: continue a paused, interrupted or crashed run."""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import typer

from gated_react.cli import flags, resources
from gated_react.cli.exits import CliError, Exit, user_errors
from gated_react.cli.live import render
from gated_react.cli.live.session import Place, Result, Session, exit_code, logged, show
from gated_react.cli.model_source import model_for_run
from gated_react.records.events import Tracker
from gated_react.records.store import readable

if TYPE_CHECKING:
    from gated_react.cli.run_options import RunOptions


def resume_command(
    thread: flags.Thread,
    *,
    approve: flags.Approve = False,
    reject: flags.Reject = None,
    args: flags.Args = None,
    respond: flags.Respond = None,
    answer_json: flags.AnswerJson = None,
    db: flags.Db = None,
    model: flags.Model = None,
    base_url: flags.BaseUrl = None,
    json_out: flags.Json = False,
    log: flags.Log = None,
    no_log: flags.NoLog = False,
) -> None:
    """Continue a run where it stopped; answer a pending approval. Same exit codes as run."""
    answer = parse_answer(approve, reject, args, respond=respond, answer=answer_json)
    place = Place(db=db, log=log, no_log=no_log, json_out=json_out)
    code = resume_in_shell(thread, answer, place, model=model, base_url=base_url)
    if code:
        raise typer.Exit(int(code))


def resume_in_shell(
    thread: str,
    answer: dict[str, Any] | None,
    place: Place,
    *,
    model: str | None,
    base_url: str | None,
) -> Exit:
    config = resources.settings()
    url = resources.store_url(config, place.db)
    with resources.opened(url) as saver:
        with readable(thread):  # rows this version cannot decode: one line, nothing runs
            options = recorded_options(saver, thread, url)
            current = _current(saver, thread)
            granted = _extensions(saver, thread)
            # the limits in force: with what humans granted earlier in the run, not the policy's
            budget = render.in_force(options.budget(), granted)  # no MCP server starts here
            early = settled(current, answer, thread)
            if early is not None:  # nothing to run: show what is stored
                show(render.console(), current, budget, config.secrets(), place)
                return early
        model, base_url = model or options.model, base_url or options.base_url
        from gated_react.cli.run_options import close_mcp

        with contextlib.ExitStack() as stack:
            stack.callback(close_mcp)  # the run's MCP servers stop with it
            with user_errors():
                chosen = stack.enter_context(
                    model_for_run(
                        config, model=model, base_url=base_url, model_file=options.model_file
                    )
                )
            graph = resources.graph_for(options, chosen.chat, saver)
            runlog = stack.enter_context(logged(url, place, config))
            tracker = Tracker(thread, usage=current.get("usage") or {}, extensions=granted)
            session = Session(tracker, options.budget(), runlog, config.secrets(), place)
            session.header(chosen.label, url)
            session.note("resumed", action=None if answer is None else {"answer": answer})
            from gated_react.runs import resume

            result = session.drive(
                lambda watch: resume(graph, thread, *_answer(answer), on_update=watch),
                first_wait="resuming the run",
            )
            return session.finish(result)


def parse_answer(
    approve: bool,
    reject: str | None,
    args: str | None,
    *,
    respond: str | None = None,
    answer: str | None = None,
) -> dict[str, Any] | None:
    """The approval answer from the flags; at most one of them."""
    flags = {
        "--approve": approve or None,
        "--reject": reject,
        "--args": args,
        "--respond": respond,
        "--answer": answer,
    }
    given = [name for name, value in flags.items() if value is not None]
    if len(given) > 1:
        raise CliError(f"use only one of {', '.join(given)}")
    if reject is not None:
        return {"approved": False, "reason": reject}
    if respond is not None:
        return {"decisions": [{"type": "respond", "message": respond}]}
    if args is not None:
        return {"approved": True, "args": json_object("--args", args)}
    if answer is not None:
        return json_object("--answer", answer)
    return {"approved": True} if approve else None


def json_object(flag: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CliError(f"{flag} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CliError(f"{flag} must be a JSON object, got {type(value).__name__}")
    return value


def recorded_options(saver: Any, thread: str, url: str | None = None) -> RunOptions:
    """The options the thread's run was started with (``url``: the store, to say so when the
    run is the workers')."""
    from gated_react.cli.run_options import RunOptions
    from gated_react.runs import UnknownThread, config_for

    found = saver.get_tuple(config_for(thread))
    if found is None:
        raise CliError(str(UnknownThread(thread)))
    options = RunOptions.from_metadata(found.metadata)
    if options is None:
        _refuse_a_fleet_run(url, thread)
        from gated_react.records.run_listing import started_by

        assistant = (found.metadata or {}).get("assistant_id")
        raise CliError(answered_elsewhere(started_by(found.metadata), thread, assistant))
    if options.example:  # where the files are follows from the thread, never from the store
        from gated_react.cli.commands.run import example_dir

        options = options.model_copy(update={"example_dir": str(example_dir(thread))})
    return options


def answered_elsewhere(started: str, thread: str, assistant: Any = None) -> str:
    """How a thread the CLI cannot continue is continued (``started``: ``langgraph`` or
    ``program``, ``run_listing.started_by``), as one sentence."""
    if started == "langgraph":
        named = repr(str(assistant)) if assistant else "ASSISTANT_ID"
        return (
            f"thread {thread!r} is run by a LangGraph server (langgraph dev): answer it there, "
            f"in Studio or with the LangGraph SDK: client.runs.create({thread!r}, {named}, "
            "command={'resume': ANSWER})"
        )
    return (
        f"thread {thread!r} was not started by the gated-react CLI; resume it from the "
        "program that started it (gated_react.resume)"
    )


def _refuse_a_fleet_run(url: str | None, thread: str) -> None:
    """A thread the workers run is answered through them, not resumed here."""
    from gated_react.store.checkpointer import StoreURL

    if url is None or StoreURL.parse(url).kind != "postgres":
        return
    from gated_react.records.queue_listing import owned_by_fleet

    if owned_by_fleet(StoreURL.parse(url).target, thread):
        raise CliError(
            f"thread {thread!r} is run by the workers: answer its question with "
            f"gated-react answer {thread} --approve (or --reject WHY, ...); "
            f"its jobs: gated-react queue --thread {thread}"
        )


def _current(saver: Any, thread: str) -> Result:
    """The thread as stored (read without building the run's graph)."""
    from gated_react.runs import read

    with user_errors():
        return read(resources.reader_graph(saver), thread)


def _extensions(saver: Any, thread: str) -> list[Any]:
    """The budget extensions the thread's run holds (stored as plain JSON)."""
    found = saver.get_tuple({"configurable": {"thread_id": thread}})
    values = found.checkpoint.get("channel_values", {}) if found else {}
    granted = values.get("extensions")
    return list(granted) if isinstance(granted, list) else []


def settled(current: Result, answer: Any, thread: str) -> Exit | None:
    """The exit code when nothing should run: finished, or waiting and no answer given."""
    if current.get("status") not in (None, "paused"):  # paused: a waiting run, not an ended one
        if answer is not None:
            raise CliError(
                f"thread {thread!r} has ended ({current.get('stop_reason')}); nothing to approve"
            )
        return exit_code(current)
    if current.get("pending"):
        return Exit.PAUSED if answer is None else None
    if answer is not None:
        raise CliError(
            f"thread {thread!r} is not waiting for an approval; "
            f"resume it without --approve/--reject/--args/--respond/--answer"
        )
    return None


def _answer(answer: dict[str, Any] | None) -> tuple[Any, ...]:
    return () if answer is None else (answer,)
