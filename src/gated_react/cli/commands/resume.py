"""``gated-react resume THREAD``: continue a paused, interrupted or crashed run."""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import typer

from gated_react.cli import flags, resources
from gated_react.cli.answers import asked_question, parse_answer, settled
from gated_react.cli.commands.run import example_dir
from gated_react.cli.exits import CliError, Exit, user_errors
from gated_react.cli.live import render
from gated_react.cli.live.session import Place, Result, Session, logged, show
from gated_react.cli.model_source import model_for_run
from gated_react.errors import one_line, printable
from gated_react.records.events import Tracker
from gated_react.records.store import readable
from gated_react.store.locks import ThreadBusy, held
from gated_react.store.signed import key_of

if TYPE_CHECKING:
    from gated_react.cli.run_options import RunOptions


@flags.with_run_options
def resume_command(
    thread: flags.Thread,
    *,
    question: flags.Question = None,
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
    given: dict[str, Any],
) -> None:
    """Continue a run where it stopped; answer a pending approval. Give the options the run was
    started with again (--toolkit, --approve-tool, ...). Same exit codes as run."""
    answer = parse_answer(approve, reject, args, respond=respond, answer=answer_json)
    place = Place(db=db, log=log, no_log=no_log, json_out=json_out)
    code = resume_in_shell(
        thread, answer, place, given, model=model, base_url=base_url, question=question
    )
    if code:
        raise typer.Exit(int(code))


def resume_in_shell(
    thread: str,
    answer: dict[str, Any] | None,
    place: Place,
    given: Mapping[str, Any],
    *,
    model: str | None,
    base_url: str | None,
    question: str | None = None,
) -> Exit:
    config = resources.settings()
    url = resources.store_url(config, place.db)
    with resources.opened(url, create=False) as saver:
        with readable(thread):  # rows this version cannot decode: one line, nothing runs
            metadata = _metadata(saver, thread)
            current = _current(saver, thread)
            early = settled(current, answer, thread, saver)
            if question is not None and early is None:
                asked_question(current, thread, question, answer, saver)
            if early is not None:  # nothing to run: show what is stored
                if not current.get("pending"):
                    _note(f"thread {thread!r} had ended ({current.get('stop_reason')}); nothing "
                          "ran: this is what it stored")  # fmt: skip
                budget = resources.run_budget(saver, thread, metadata)
                secrets, elsewhere = config.secrets(), _elsewhere(metadata, thread)
                show(render.console(), current, budget, secrets, place, elsewhere=elsewhere)
                return early
            if held(saver, thread):  # said before the header; the run takes the lock itself
                raise CliError(str(ThreadBusy(thread)))
            options = options_for(
                thread, given, metadata, url, model=model, base_url=base_url,
                keyed=key_of(saver) is not None, waiting=bool(current.get("pending")),
            )  # fmt: skip
        place = replace(place, again=options.flags())
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
            asked_unasked(current, options, thread)
            runlog = stack.enter_context(logged(url, place, config))
            tracker = Tracker(thread, saver)
            session = Session(tracker, options.budget(), runlog, config.secrets(), place)
            session.header(chosen.label, url)
            session.note("resumed", action=None if answer is None else {"answer": answer})
            from gated_react.runs import resume

            result = session.drive(
                lambda watch: resume(
                    graph, thread, *_answer(answer), question=question, on_update=watch
                ),
                first_wait="resuming the run",
            )
            return session.finish(result)


def options_for(
    thread: str,
    given: Mapping[str, Any],
    metadata: Mapping[str, Any] | None,
    url: str | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    keyed: bool = False,
    waiting: bool = True,
) -> RunOptions:
    """The options to continue the thread's run with: the ones given on this command line,
    never the ones its checkpoints record (whoever can write the store could change those);
    what they record is only said, when the options are missing or differ."""
    from gated_react.cli.model_source import uses_local
    from gated_react.cli.run_options import RunOptions, recorded

    said = recorded(metadata)
    if said is None:
        _refuse_a_fleet_run(url, thread, waiting=waiting)
        from gated_react.records.run_listing import started_by

        assistant = (metadata or {}).get("assistant_id")
        raise CliError(answered_elsewhere(started_by(metadata), thread, assistant))
    if not any(value not in (None, []) for value in given.values()):
        flags = shlex.join(said.flags()) or "no options"
        said_so = (
            f"its checkpoints say: {shlex.join(['gated-react', 'resume', thread, *said.flags()])}"
            if keyed  # signed: the command as it was
            else f"its checkpoints say it was started with {flags} ({_UNSIGNED})"
        )
        raise CliError(
            f"thread {thread!r}: give the options the run was started with again (its tools "
            f"and policy are never read back from the store); {said_so}"
        )
    example = given.get("example")
    options = RunOptions.given(
        given,
        local=uses_local(resources.settings(), base_url),
        # where an example's files are follows from the thread, never from the store
        example_dir=str(example_dir(thread)) if example else None,
        model=model,
        base_url=base_url,
    )
    if options.flags() != said.flags():
        before, now = shlex.join(said.flags()) or "no options", shlex.join(options.flags())
        _note(f"thread {thread!r} was started with {before} (as its checkpoints say); "
              f"resuming it with {now}")  # fmt: skip
    return options


_UNSIGNED = (
    "the store has no key, so anyone who can write it could have changed them: "
    "check them before giving them again"
)


def asked_unasked(current: Result, options: RunOptions, thread: str) -> None:
    """Refuse to continue a run that waits on a human's answer about a call these options would
    let run without asking: the answer would go unread and the call run. (Call after
    ``options.tools()``: MCP tools marked destructive ask too.)"""
    asking = options.policy().require_approval
    for question in current.get("pending") or ():
        if not isinstance(question, Mapping):
            continue
        tool = question.get("tool")
        if question.get("kind") in ("approval", "outcome_unknown") and tool not in asking:
            raise CliError(
                f"thread {thread!r} waits on a human's answer about {tool}, which these options "
                f"let run without asking; give --approve-tool {tool} as the run was started"
            )


def _note(line: str) -> None:
    sys.stderr.write(f"gated-react: note: {printable(one_line(line))}\n")
    sys.stderr.flush()


def _metadata(saver: Any, thread: str) -> Mapping[str, Any] | None:
    """The newest checkpoint's metadata (``UnknownThread`` as one line without one)."""
    from gated_react.runs import UnknownThread, config_for

    found = saver.get_tuple(config_for(thread))
    if found is None:
        raise CliError(str(UnknownThread(thread)))
    return found.metadata  # type: ignore[no-any-return]


def _elsewhere(metadata: Mapping[str, Any] | None, thread: str) -> str | None:
    """How a thread the CLI did not start is answered; None for one it started."""
    from gated_react.cli.run_options import recorded
    from gated_react.records.run_listing import started_by

    if recorded(metadata) is not None:
        return None
    return answered_elsewhere(started_by(metadata), thread, (metadata or {}).get("assistant_id"))


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


def _refuse_a_fleet_run(url: str | None, thread: str, *, waiting: bool) -> None:
    """A thread the workers run is continued through them, not resumed here: its question
    answered with ``gated-react answer``; a run that stopped short (no question) by its job."""
    from gated_react.store.checkpointer import StoreURL

    if url is None or StoreURL.parse(url).kind != "postgres":
        return
    from gated_react.records.queue_listing import live_job, owned_by_fleet

    target = StoreURL.parse(url).target
    if not owned_by_fleet(target, thread):
        return
    jobs = f"its jobs: gated-react queue --thread {render.shell_word(thread)}"
    if waiting:
        raise CliError(
            f"thread {thread!r} is run by the workers: answer its question with "
            f"gated-react answer {thread} --approve (or --reject WHY, ...); {jobs}"
        )
    why = f"thread {thread!r} is run by the workers and waits on no question: its run stopped "
    live = live_job(target, thread)
    if live is not None:  # a worker killed or stopped mid-run: its job is taken over
        raise CliError(
            f"{why}short and its job {live[0]} is {live[1]}: a worker continues it (a running "
            "job once its worker has missed --stalled-after seconds of heartbeats), nothing to "
            f"answer; start one if none runs (python -m gated_react.workers); {jobs}"
        )
    raise CliError(
        f"{why}short and no job of it is queued (its last one failed): once the cause is "
        f"fixed, queue it again without an answer: enqueue_resume(app, {thread!r}) "
        f"(gated_react.workers); {jobs}"
    )


def _current(saver: Any, thread: str) -> Result:
    """The thread as stored (read without building the run's graph)."""
    from gated_react.runs import read

    with user_errors():
        return read(resources.reader_graph(saver), thread)


def _answer(answer: dict[str, Any] | None) -> tuple[Any, ...]:
    return () if answer is None else (answer,)
