"""``gated-react questions`` and ``gated-react answer THREAD``: the runs that wait for a human,
and the answer to one of them.

A run of the workers (its thread has a job in the store's queue) continues on the workers: the
answer is queued for them, naming the question it answers, so a repeated answer can never
answer a later question. Any other run continues in this shell, as ``resume`` would.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from gated_react.cli import filters, flags, resources
from gated_react.cli.answers import asked_question, parse_answer
from gated_react.cli.commands.resume import resume_in_shell
from gated_react.cli.exits import CliError, user_errors
from gated_react.cli.live import render
from gated_react.cli.live.session import Place
from gated_react.records.store import readable

if TYPE_CHECKING:
    from gated_react.records.question_listing import QuestionRow

_HEADS = ("thread", "since", "step", "tool", "question", "answered with")
_ANSWERED_WITH = {
    "cli": "gated-react answer",
    "workers": "gated-react answer",
    "langgraph": "LangGraph SDK or Studio",
    "program": "its program",
}
"""How each thread's question is answered, by who started its run (``QuestionRow``)."""
_ELSEWHERE = {
    "langgraph": "a thread of a LangGraph server (langgraph dev) is answered there: in Studio, "
    "or with the LangGraph SDK: client.runs.create(THREAD, ASSISTANT_ID, "
    "command={'resume': ANSWER})",
    "program": "a thread a program started is answered by that program: "
    "gated_react.resume(graph, THREAD, ANSWER, question=ID)",
}
_UNKNOWN = (
    "it started before its run was cut off, and its outcome is unknown; approving runs it again"
)
_HERE = "gated-react answer THREAD --question ID --approve (or --reject WHY, --respond TEXT, ...)"


def questions_command(
    limit: Annotated[
        int,
        typer.Option(min=1, max=filters.MAX_LISTED, metavar="N", help="How many threads to list."),
    ] = 50,
    db: flags.Db = None,
    json_out: flags.Json = False,
) -> None:
    """List every run waiting on a question: thread, since when, tool and arguments."""
    from gated_react.records.question_listing import waiting_runs

    config = resources.settings()
    url = resources.store_url(config, db)
    secrets = config.secrets()
    rows = []  # no store there yet: nothing waits, and none is made
    if not resources.missing(url):
        with resources.opened(url) as saver:
            rows = _with_workers(url, waiting_runs(saver, limit))
    if json_out:
        render.print_json({"questions": [row.as_json() for row in rows]}, secrets)
        return
    console = render.console()
    where = render.safe(resources.shown(url))
    if not rows:
        console.print(f"no run waits on a question in {where}")
        return
    cells = [_cells(row, secrets) for row in rows]
    widths = render.widths(_HEADS, cells)
    console.print(render.row_line(list(_HEADS), widths, "bold"), soft_wrap=True)
    for row, cell in zip(rows, cells, strict=True):
        console.print(render.row_line(cell, widths, "yellow", 3), soft_wrap=True)
        if row.problem is not None:  # not read: what it asks is not shown, nor trusted
            console.print(f"  [red]{row.status}[/] {render.safe(row.problem, secrets)}")
            continue
        # The arguments are what an approver must read: in full on a line of their own (the
        # console wraps them), never cut to whatever width the columns leave.
        args = render.safe(json.dumps(row.args, ensure_ascii=False, default=str), secrets)
        console.print(f"  [yellow]args[/] {args}")
        if row.kind == "outcome_unknown":
            console.print(f"  [red]may have run already[/]: {_UNKNOWN}", soft_wrap=True)
    for line in _how_to_answer(rows, where):
        console.print(f"[dim]{line}[/]", soft_wrap=True)


def _how_to_answer(rows: list[QuestionRow], where: str) -> list[str]:
    """The lines that say how the questions listed are answered: ``gated-react answer`` only
    for the threads it answers (a thread of another host it refuses)."""
    kinds = {row.started_by for row in rows}
    here = kinds & {"cli", "workers"}
    lines = [f"{len(rows)} waiting in {where}"]
    if here == kinds:
        lines[0] += f"; answer one with: {escape(_HERE)}"
    elif here:
        lines.append(f"those answered with gated-react answer: {escape(_HERE)}")
    lines += [escape(_ELSEWHERE[kind]) for kind in ("langgraph", "program") if kind in kinds]
    return lines


def _with_workers(url: str, rows: list[QuestionRow]) -> list[QuestionRow]:
    """The rows, those of threads with a job in the store's queue marked ``workers``."""
    from gated_react.records.queue_listing import fleet_threads
    from gated_react.store.checkpointer import StoreURL

    store = StoreURL.parse(url)
    if store.kind != "postgres" or not rows:
        return rows
    fleet = fleet_threads(store.target, [row.thread_id for row in rows])
    return [replace(row, started_by="workers") if row.thread_id in fleet else row for row in rows]


def _cells(row: QuestionRow, secrets: tuple[str, ...]) -> list[str]:
    question = row.question if row.problem is None else f"({row.status})"
    values = [row.since, str(row.step or "-"), row.tool or "-", question]
    values.append(_ANSWERED_WITH.get(row.started_by, row.started_by))
    return [render.ident(row.thread_id, secrets), *(render.plain(v, secrets) for v in values)]


@flags.with_run_options
def answer_command(
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
    """Answer a waiting run: the workers continue a run of theirs, any other continues here,
    with the options it was started with given again (--toolkit, --approve-tool, ...)."""
    from gated_react.runs import config_for, read

    answer = parse_answer(approve, reject, args, respond=respond, answer=answer_json)
    if answer is None:
        raise CliError(
            "give the answer: --approve, --reject WHY, --args JSON, --respond TEXT or --answer JSON"
        )
    config = resources.settings()
    url = resources.store_url(config, db)
    with resources.opened(url, create=False) as saver, user_errors(), readable(thread):
        saver.get_tuple(config_for(thread))  # a thread it cannot read: one line, here
        current = read(resources.reader_graph(saver), thread)
        asked = asked_question(current, thread, question, answer, saver)
    target = _fleet_target(url, thread)
    place = Place(db=db, log=log, no_log=no_log, json_out=json_out)
    if target is None:
        code = resume_in_shell(
            thread, answer, place, given, model=model, base_url=base_url, question=question
        )
        if code:
            raise typer.Exit(int(code))
        return
    job = _enqueue(url, target, thread, answer, str(asked["id"]))
    out = {"thread_id": thread, "question": asked["id"], "tool": asked.get("tool"), "job": job}
    if json_out:
        render.print_json({**out, "queued": True}, config.secrets())
        return
    render.console().print(
        f"queued for the workers: the answer to {render.safe(str(asked.get('tool')))} "
        f"(question {render.safe(str(asked['id']))}) of thread {render.safe(thread)}, job {job}",
        soft_wrap=True,
    )


def _fleet_target(url: str, thread: str) -> str | None:
    """The Postgres target when the thread's run belongs to the workers, else None."""
    from gated_react.records.queue_listing import owned_by_fleet
    from gated_react.store.checkpointer import StoreURL

    store = StoreURL.parse(url)
    if store.kind != "postgres" or not owned_by_fleet(store.target, thread):
        return None
    return store.target


def _enqueue(url: str, target: str, thread: str, answer: Any, question: str) -> int:
    """Queue the answer for the workers; a second answer to the same question is refused: one
    already running is found here, one still queued by the queueing lock of ``enqueue_resume``
    (two answers at once both pass the first check)."""
    from gated_react.records.queue_listing import queued_answer

    earlier = queued_answer(target, thread, question)
    if earlier is not None:
        raise _answered(thread, question, earlier)
    from procrastinate.exceptions import AlreadyEnqueued, ProcrastinateException

    from gated_react.errors import exception_line
    from gated_react.records.queue import client_app, enqueue_resume

    app = client_app(url)
    try:
        with app.open():
            return enqueue_resume(app, thread, answer, question=question, once=True)
    except AlreadyEnqueued:
        raise _answered(thread, question, queued_answer(target, thread, question)) from None
    except ProcrastinateException as exc:
        raise CliError(f"cannot queue the answer: {exception_line(exc, first_only=True)}") from None


def _answered(thread: str, question: str, job: int | None) -> CliError:
    known = "" if job is None else f" (job {job})"
    return CliError(f"question {question!r} of thread {thread!r} is answered already{known}")
