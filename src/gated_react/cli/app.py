"""The typer application: commands are registered here; errors become one line and an exit code."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from gated_react.cli.commands import (
    delete,
    enqueue,
    graph,
    questions,
    queue,
    resume,
    run,
    runs,
    show,
    sign,
)
from gated_react.cli.exits import CliError, Exit, say_error
from gated_react.errors import exception_line
from gated_react.records import RecordError
from gated_react.records.store import store_failure
from gated_react.release import package_version

_HELP = """A ReAct agent in which the model proposes and a policy decides.

Exit codes: 0 success, 1 the command could not run, 2 stopped by the policy,
3 a model or tool failed, 4 waiting for approval, 130 interrupted (resumable)."""


class _Group(TyperGroup):
    """Runs commands without click's standalone handling, so every error is one line."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        code = self._code(args, prog_name, complete_var, extra)
        if standalone_mode:
            sys.exit(code)
        return code

    def _code(
        self,
        args: Sequence[str] | None,
        prog_name: str | None,
        complete_var: str | None,
        extra: dict[str, Any],
    ) -> int:
        try:
            value = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except CliError as exc:
            say_error(str(exc))
            return int(exc.code)
        except RecordError as exc:  # a run log, a stored thread or the queue: one line too
            say_error(exception_line(exc))
            return int(Exit.ERROR)
        except TyperException as exc:  # usage errors: a bad option, a missing argument
            ctx = getattr(exc, "ctx", None)
            where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
            say_error(f"{exc.format_message()}{where}")
            return int(Exit.ERROR)
        except typer.Abort:
            return int(Exit.INTERRUPTED)
        except Exception as exc:  # a store that fails while a command reads it: one line too
            line = store_failure(exc)
            if line is None:
                raise
            say_error(f"the store failed: {line}")
            return int(Exit.ERROR)
        return value if isinstance(value, int) else int(Exit.OK)


app = typer.Typer(
    cls=_Group,
    name="gated-react",
    help=_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"gated-react {package_version()}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
        ),
    ] = False,
) -> None:
    """A ReAct agent in which the model proposes and a policy decides."""


app.command("run")(run.run_command)
app.command("resume")(resume.resume_command)
app.command("runs")(runs.runs_command)
app.command("show")(show.show_command)
app.command("graph")(graph.graph_command)
app.command("queue")(queue.queue_command)
app.command("enqueue")(enqueue.enqueue_command)
app.command("questions")(questions.questions_command)
app.command("answer")(questions.answer_command)
app.command("sign")(sign.sign_command)
app.command("delete")(delete.delete_command)
app.command("prune")(delete.prune_command)
