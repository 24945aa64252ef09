"""Options shared by several commands (typer ``Annotated`` aliases), and the options that shape
a run (``with_run_options``): ``run`` starts a run with them, ``resume`` and ``answer`` continue
one with them, given again (a store's record of them is shown, never obeyed)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from gated_react.cli.exits import CliError

Thread = Annotated[
    str, typer.Argument(help="The run's thread id.", show_default=False, metavar="THREAD")
]
NewThread = Annotated[
    str | None,
    typer.Option(help="Thread id for the run [default: a new random id]", metavar="ID"),
]
MAX_THREAD_CHARS = 256
"""The longest thread id ``run`` and ``enqueue`` start a run under: longer ones (20,000
characters once) widened every line of ``runs`` and every message naming the thread."""
Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Run store: a path, sqlite:///path, postgresql://... or memory "
        "[default: $GATED_REACT_DB, else runs.sqlite in the XDG state folder]",
        show_default=False,
    ),
]
Log = Annotated[
    Path | None,
    typer.Option(
        "--log",
        metavar="PATH",
        help="Run log (JSON lines) [default: next to the store, e.g. runs.sqlite.log]",
        show_default=False,
        dir_okay=False,
    ),
]
NoLog = Annotated[bool, typer.Option("--no-log", help="Write no run log.")]
Json = Annotated[
    bool, typer.Option("--json", help="Print only the result object as JSON on stdout.")
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model", metavar="NAME", help="Model name [default: $OPENAI_MODEL or gpt-4.1-mini]."
    ),
]
BaseUrl = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        metavar="URL",
        help="An OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 "
        "[default: $OPENAI_BASE_URL, else OpenAI]",
        show_default=False,
    ),
]

# The answers to a question (``resume``, ``answer``); ``answers.parse_answer`` reads them.
Question = Annotated[
    str | None,
    typer.Option(
        "--question",
        metavar="ID",
        help="The question answered: the answer is refused if the run no longer waits on it "
        "(the commands a paused run prints name it; needed when the run waits on several).",
        show_default=False,
    ),
]
Approve = Annotated[bool, typer.Option("--approve", help="Approve the call the run waits on.")]
Reject = Annotated[
    str | None,
    typer.Option(
        "--reject", metavar="WHY", help="Reject the call, with the reason.", show_default=False
    ),
]
Args = Annotated[
    str | None,
    typer.Option(
        "--args", help="Approve with these arguments instead (a JSON object).", metavar="JSON"
    ),
]
Respond = Annotated[
    str | None,
    typer.Option(
        "--respond",
        metavar="TEXT",
        help="Answer in place of the tool: it does not run; TEXT is what the model sees.",
        show_default=False,
    ),
]
AnswerJson = Annotated[
    str | None,
    typer.Option(
        "--answer",
        metavar="JSON",
        help='Any answer the question takes, e.g. {"decisions": [{"type": "approve"}]}.',
        show_default=False,
    ),
]


class ProtocolChoice(StrEnum):
    tools = "tools"
    json = "json"
    text = "text"


class OnBudgetChoice(StrEnum):
    stop = "stop"
    ask = "ask"


Toolkits = Annotated[
    list[str] | None,
    typer.Option(
        "--toolkit",
        "-t",
        metavar="NAME",
        help="Tools to give the model: support, calculator, sql, workspace; repeat for several "
        "[default: support]",
        show_default=False,
    ),
]
Allow = Annotated[
    list[str] | None,
    typer.Option(
        "--allow",
        metavar="TOOL",
        help="Only these tools may run (repeat) [default: every tool of the toolkits]",
        show_default=False,
    ),
]
ApproveTool = Annotated[
    list[str] | None,
    typer.Option(
        "--approve-tool",
        metavar="TOOL",
        help="Calls to this tool pause for a human (repeat); answer with gated-react resume",
        show_default=False,
    ),
]
McpConfigs = Annotated[
    list[Path] | None,
    typer.Option(
        "--mcp",
        metavar="CONFIG.json",
        help='Tools of the MCP servers in this config ({"mcpServers": ...}), named '
        "SERVER__TOOL; repeat for several; alongside or instead of --toolkit",
        show_default=False,
        dir_okay=False,
    ),
]
Trust = Annotated[
    list[str] | None,
    typer.Option(
        "--trust-tool",
        metavar="TOOL",
        help="This MCP tool runs without asking although its server marks it destructive (repeat)",
        show_default=False,
    ),
]
MaxSteps = Annotated[
    int | None,
    typer.Option(min=1, metavar="N", help="Model decisions [default: 8]", show_default=False),
]
MaxToolCalls = Annotated[
    int | None,
    typer.Option(min=0, metavar="N", help="Tool calls [default: 6]", show_default=False),
]
MaxSeconds = Annotated[
    float | None,
    typer.Option(min=0.001, metavar="S", help="Active seconds [default: 20]", show_default=False),
]
MaxTokens = Annotated[
    int | None, typer.Option(min=1, metavar="N", help="Model tokens [default: unlimited]")
]
MaxCost = Annotated[
    float | None,
    typer.Option(min=1e-9, metavar="USD", help="Model cost in dollars [default: unlimited]"),
]
OnBudget = Annotated[
    OnBudgetChoice | None,
    typer.Option(
        help="A spent budget stops the run, or asks to extend it [default: stop]",
        show_default=False,
    ),
]
ProtocolFlag = Annotated[
    ProtocolChoice | None,
    typer.Option(
        help="How the model states its action [default: tools; json on the local model]",
        show_default=False,
    ),
]
Workspace = Annotated[
    Path | None,
    typer.Option(
        help="Root folder for the workspace toolkit [default: .]", file_okay=False, metavar="DIR"
    ),
]
Database = Annotated[
    Path | None,
    typer.Option(help="SQLite file for the sql toolkit", dir_okay=False, metavar="FILE"),
]
Example = Annotated[
    str | None,
    typer.Option(
        help="Run a seed system: 000-support, 001-coding, 002-data or 003-search "
        "(its tools and policy; GOAL defaults to its goal)",
        metavar="NAME",
    ),
]
ModelFile = Annotated[
    Path | None,
    typer.Option(
        help="GGUF file for the local model (used when no model server is configured)",
        dir_okay=False,
        metavar="FILE",
    ),
]

RUN_OPTIONS: dict[str, Any] = {
    "toolkit": Toolkits,
    "allow": Allow,
    "approve_tool": ApproveTool,
    "mcp": McpConfigs,
    "trust_tool": Trust,
    "max_steps": MaxSteps,
    "max_tool_calls": MaxToolCalls,
    "max_seconds": MaxSeconds,
    "max_tokens": MaxTokens,
    "max_cost": MaxCost,
    "on_budget": OnBudget,
    "protocol": ProtocolFlag,
    "workspace": Workspace,
    "database": Database,
    "example": Example,
    "model_file": ModelFile,
}
"""The options that shape a run (each None when not given), by parameter name."""
Command = TypeVar("Command", bound=Callable[..., Any])


def with_run_options(command: Command) -> Command:
    """``command`` taking every option of ``RUN_OPTIONS`` too, after its own, handed to it as
    one dict: its ``given`` parameter (the options given, None for the others)."""
    own = inspect.signature(command, eval_str=True)
    kept = [param for name, param in own.parameters.items() if name != "given"]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind)
        for name, kind in RUN_OPTIONS.items()
    ]

    def taking(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name, None) for name in RUN_OPTIONS}
        return command(*args, given=given, **kwargs)

    taking.__name__, taking.__doc__ = command.__name__, command.__doc__
    taking.__signature__ = own.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    taking.__annotations__ = {p.name: p.annotation for p in [*kept, *added]}
    return taking  # type: ignore[return-value]


def new_thread(given: str | None) -> str:
    """The thread id of a run about to start (``--thread``, else a new random id): printable
    text of at most ``MAX_THREAD_CHARS`` characters, so every listing and message can show it
    as it is and a person can type it back."""
    import uuid

    if given is None:
        return uuid.uuid4().hex
    if not given.strip():
        raise CliError("--thread: the thread id is empty")
    if given != given.strip():  # a listing's column would show it trimmed, another id
        raise CliError("--thread: the thread id begins or ends with a space; give it without")
    if given.startswith("-"):  # ``gated-react show -x`` reads it as an option
        raise CliError("--thread: the thread id begins with '-', which commands read as an option")
    if len(given) > MAX_THREAD_CHARS:
        raise CliError(
            f"--thread: a thread id is at most {MAX_THREAD_CHARS} characters; "
            f"this one has {len(given):,}"
        )
    odd = next((c for c in given if not c.isprintable()), None)
    if odd is not None:
        what = (
            f"a byte that is not UTF-8 text (0x{ord(odd) - 0xDC00:02X})"
            if "\udc80" <= odd <= "\udcff"  # how Python passes such a byte on
            else f"a character that cannot be shown (U+{ord(odd):04X})"
        )
        raise CliError(f"--thread: the thread id holds {what}; give one of printable text")
    return given
