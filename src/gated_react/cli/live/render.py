"""What a person sees: one line per node while a run goes, then a summary."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterable, Mapping
from typing import IO, Any, cast

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gated_react.errors import one_line, printable, printable_json
from gated_react.records.described import clip
from gated_react.records.events import Event
from gated_react.redact import redact

_STYLE = {
    "proposed": "cyan",
    "allowed": "green",
    "ok": "green",
    "answered": "bold green",
    "refused": "yellow",
    "retry": "yellow",
    "paused": "bold yellow",
    "error": "red",
    "failed": "red",
    "invalid": "red",
    "stopped": "bold red",
}
_BUDGET_NODES = frozenset({"observe", "finish", "stop"})


def console() -> Console:
    """A console that prints text as given: no highlighting, no ``:emoji:`` codes; piped, its
    lines carry no trailing spaces (rich pads every table cell to its column's width)."""
    shown = Console(highlight=False, emoji=False)
    if shown.is_terminal:
        return shown
    trimmed = cast(IO[str], Trimmed(sys.stdout))  # write and flush are all rich calls
    return Console(highlight=False, emoji=False, file=trimmed, width=shown.width)


class Trimmed:
    """A text stream that drops the spaces ending each line it passes on."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.pending = ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        if lines:
            self.stream.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.stream.write(self.pending)
            self.pending = ""
        self.stream.flush()


def plain(
    value: Any, secrets: Iterable[str | None] = (), *, limit: int | None = None, lines: bool = False
) -> str:
    """Untrusted text (goal, model reply, tool output, anything read from a store or a log) made
    safe to print: secrets masked first (so clipping never leaves half a key behind), then one
    line clipped to ``limit`` (``lines`` keeps newlines and tabs), control characters escaped."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = redact(text, *secrets)
    if not lines:
        text = clip(text, limit) if limit else one_line(text)
    return printable(text)


def safe(
    value: Any, secrets: Iterable[str | None] = (), *, limit: int | None = None, lines: bool = False
) -> str:
    """``plain`` as rich markup that prints exactly that text: ``[red]`` stays ``[red]``."""
    return escape(plain(value, secrets, limit=limit, lines=lines))


def ident(value: str, secrets: Iterable[str | None] = ()) -> str:
    """An id (a thread's) as a listing shows it: exactly, a newline or a tab in it escaped as
    any control character is (``\\n``), never folded into a space that names another id."""
    return printable(redact(value, *secrets).replace("\n", "\\n").replace("\t", "\\t"))


def shell_word(text: str) -> str:
    """``text`` as one shell word a person can type back: quoted as ``shlex`` quotes it, or,
    when it holds a character a terminal does not show as itself (a newline, a tab, a
    control), in bash's ``$'...'`` with that character escaped."""
    if text.isprintable():
        return shlex.quote(text)
    return "$'" + "".join(_ansi_c(ch) for ch in text) + "'"


def _ansi_c(ch: str) -> str:
    """One character inside ``$'...'``."""
    if ch in "\\'":
        return "\\" + ch
    if ch.isprintable():
        return ch
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def shell_join(words: Iterable[str]) -> str:
    """A command line of ``words``, each as ``shell_word`` quotes it."""
    return " ".join(shell_word(word) for word in words)


def widths(heads: Iterable[str], rows: list[list[str]]) -> list[int]:
    """Each column's width on a terminal: the widest of its head and its plain cells, counted
    in terminal cells (a wide character such as an emoji takes two)."""
    return [max(cell_len(h), *(cell_len(row[i]) for row in rows)) for i, h in enumerate(heads)]


def row_line(cells: list[str], widths: list[int], style: str, styled: int | None = None) -> str:
    """One row of a listing: plain ``cells`` padded to ``widths`` terminal cells (a cell past
    them is not), escaped, in ``style`` (only the cell at ``styled``, if given)."""
    out = []
    for i, cell in enumerate(cells):
        pad = " " * (widths[i] - cell_len(cell)) if i < len(widths) else ""
        text = escape(cell + pad)
        out.append(f"[{style}]{text}[/]" if style and (styled is None or styled == i) else text)
    return "  ".join(out)


class LiveView:
    """Prints each event as one line with the budgets used and left after model/tool steps."""

    def __init__(self, console: Console, budget: Any, secrets: tuple[str, ...] = ()) -> None:
        self.console = console
        self.budget = budget
        self.secrets = secrets

    def show(self, event: Event) -> None:
        style = _STYLE.get(event.decision or "", "")
        decision = event.decision or ""
        row = Table.grid(padding=(0, 1), expand=True)
        row.add_column(width=3, justify="right", style="dim")
        row.add_column(width=8)
        row.add_column(width=8, style=style)
        row.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        shown = event.node in _BUDGET_NODES or event.stop_reason
        used = budgets(event, self.budget) if shown else ""
        row.add_column(no_wrap=True, style="dim", min_width=len(used))
        row.add_row(str(event.step), safe(event.node), decision, self._detail(event), used)
        self.console.print(row, highlight=False)

    def _detail(self, event: Event) -> str:
        action, secrets = event.action or {}, self.secrets
        parts = []
        if action.get("tool"):
            args = action.get("args")
            tool = safe(action["tool"], secrets, limit=60)
            parts.append(f"{tool} {safe(args, secrets, limit=60)}" if args else tool)
        for key in ("final", "text", "why", "tools"):
            if action.get(key):
                parts.append(safe(action[key], secrets, limit=70))
        if event.observation:
            parts.append(f"→ {safe(event.observation, secrets, limit=70)}")
        if event.stop_reason:
            parts.append(safe(f"[{event.stop_reason}]", secrets))
        return " ".join(parts)


def header(console: Console, rows: list[tuple[str, str]]) -> None:
    """The lines printed before a run starts: thread, model, store, log."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="dim")
    table.add_column(style="dim", overflow="fold")
    for key, value in rows:
        table.add_row(key, safe(value))
    console.print(table, highlight=False)


def in_force(budget: Any, extensions: Any) -> Any:
    """The limits a run is under: its budget with the extensions humans granted (stored as
    plain JSON), combined by ``Budget.extended``."""
    if not extensions:
        return budget
    from gated_react.state import Extension  # the run's stack is loaded by now

    return budget.extended([Extension.model_validate(extension) for extension in extensions])


def budgets(event: Event, budget: Any) -> str:
    """``steps 2/8 · tools 1/6 · 0.4/20s · 512 tok · $0.0024``: used/limit."""
    tokens = f"{event.tokens}/{budget.max_tokens}" if budget.max_tokens else f"{event.tokens}"
    dollars = "" if event.cost is None else f" · ${event.cost:.4f}"
    if dollars and budget.max_cost is not None:
        dollars += f"/{budget.max_cost:g}"
    return (
        f"steps {event.step}/{budget.max_steps} · tools {event.tool_calls}/"
        f"{budget.max_tool_calls} · {event.seconds:.1f}/{budget.max_seconds:g}s · "
        f"{tokens} tok{dollars}"
    )


def summary(
    console: Console, result: Mapping[str, Any], budget: Any, secrets: tuple[str, ...]
) -> None:
    """The end of a run: status, stop reason, answer, steps, tool calls, tokens, seconds."""
    usage = result.get("usage") or {}
    status = result.get("status") or ("paused" if result.get("pending") else "unfinished")
    color = {"ok": "green", "paused": "yellow", "running": "yellow"}.get(status, "red")
    rows = [
        ("status", f"[{color}]{safe(status)}[/]"),
        ("stop reason", safe(str(result.get("stop_reason") or "-"), secrets)),
        ("message", safe(str(result.get("message") or ""), secrets, lines=True)),
        ("answer", safe(str(result.get("answer") or ""), secrets, lines=True)),
        ("steps", f"{safe(usage.get('steps', 0))}/{budget.max_steps}"),
        # The run's own count, the one its budget checks (history holds every run's steps and
        # leaves out the call that stopped a run).
        ("tool calls", f"{safe(usage.get('tool_calls', 0))}/{budget.max_tool_calls}"),
        ("tokens", _tokens(usage)),
        ("cost", cost(usage, budget.max_cost)),
        ("seconds", f"{float(usage.get('seconds', 0.0)):.2f}/{budget.max_seconds:g} (active)"),
        ("thread", safe(str(result.get("thread_id")), secrets)),
    ]
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        if value:
            table.add_row(key, value)
    console.print()
    console.print(table, highlight=False)


def _tokens(usage: Mapping[str, Any]) -> str:
    """All tokens, and how many of the input tokens the provider read from its prompt cache."""
    cached = usage.get("cached_tokens") or 0
    tokens = safe(usage.get("tokens", 0))
    return f"{tokens} ({safe(cached)} input tokens from the prompt cache)" if cached else tokens


def cost(usage: Mapping[str, Any], limit: float | None = None) -> str:
    """``0.0024 USD`` (``/0.5`` under a cost budget), or why there is no figure."""
    if "cost" not in usage:  # a run stored before costs were recorded
        return ""
    spent = usage.get("cost")
    if not isinstance(spent, int | float):
        return f"unknown: {safe(str(usage.get('unpriced') or 'unpriced'))}"
    return f"{spent:.4f}{'' if limit is None else f'/{limit:g}'} USD"


def pending(
    console: Console, result: Mapping[str, Any], resume_cmd: str | None, secrets: tuple[str, ...]
) -> None:
    """A paused run: what waits for a human (a call to approve, a spent budget) and the ways
    to answer (none without ``resume_cmd``: a thread the CLI cannot answer)."""
    for question in result.get("pending") or ():
        if not isinstance(question, dict):
            continue
        # Each command names its question: run twice, or late, it is refused instead of
        # answering a question asked after it, which nobody has read.
        named = f" --question {shlex.quote(str(question['id']))}" if question.get("id") else ""
        cmd = None if resume_cmd is None else safe(resume_cmd + named, secrets)
        if question.get("kind") == "budget":
            _budget_question(console, question, cmd, secrets)
        else:
            _call_question(console, question, cmd, secrets)


def _call_question(
    console: Console, question: Mapping[str, Any], cmd: str | None, secrets: tuple[str, ...]
) -> None:
    args = question.get("args")
    example = json.dumps(args, ensure_ascii=False) if isinstance(args, dict) else "{...}"
    heading = _HEADINGS.get(str(question.get("kind")), _HEADINGS["approval"])
    console.print(
        f"[bold yellow]{heading}:[/] {safe(str(question.get('tool')), secrets)} "
        f"{safe(args, secrets)}",
        highlight=False,
    )
    _notes(console, question, secrets)
    if cmd is None:
        return
    ways = {
        "approve": f"  approve: {cmd} --approve",
        "reject": f"  reject:  {cmd} --reject 'why'",
        "edit": f"  edit:    {cmd} --args {safe(shlex.quote(example), secrets)}",
        "respond": f"  respond: {cmd} --respond 'the answer, in place of the tool'",
    }
    configs = question.get("review_configs") or [{}]
    allowed = configs[0].get("allowed_decisions") or list(ways)
    console.print(
        "\n".join(line for way, line in ways.items() if way in allowed),  # only what is taken
        highlight=False,
        soft_wrap=True,
    )


_HEADINGS = {
    "approval": "waiting for approval",
    "outcome_unknown": "may have run already (its outcome is unknown); approving runs it again",
}
"""What a paused run's printout calls each kind of question about a call."""


def _budget_question(
    console: Console, question: Mapping[str, Any], cmd: str | None, secrets: tuple[str, ...]
) -> None:
    """A spent budget (``Policy.on_budget="ask"``): extend it, set a limit, or stop."""
    found = question.get("args")
    args: Mapping[str, Any] = found if isinstance(found, dict) else {}
    budget, proposed = str(args.get("budget")), args.get("proposed")
    spent = f"{safe(args.get('spent'))} spent of {safe(args.get('limit'))}"
    console.print(
        f"[bold yellow]budget spent:[/] {safe(budget, secrets)} ({spent})", highlight=False
    )
    _notes(console, question, secrets)
    if cmd is None:
        return
    example = shlex.quote(json.dumps({"limit": proposed}))
    console.print(
        f"  extend:  {cmd} --approve   (to {safe(proposed)})\n"
        f"  limit:   {cmd} --args {safe(example)}\n"
        f"  stop:    {cmd} --reject 'why'",
        highlight=False,
        soft_wrap=True,
    )


def _notes(console: Console, question: Mapping[str, Any], secrets: tuple[str, ...]) -> None:
    for key in ("why", "error"):
        if question.get(key):
            console.print(f"  {key}: {safe(str(question[key]), secrets)}", highlight=False)


def _plain(value: Any) -> Any:
    """A chat message as its type and content, with the tool calls it makes or the call it
    answers (the conversation, not the client's metadata); anything else as text."""
    kind = getattr(value, "type", None)  # a LangChain message, without importing LangChain
    if not isinstance(kind, str) or not hasattr(value, "content"):
        return str(value)
    out: dict[str, Any] = {"type": kind, "content": value.content}
    calls = getattr(value, "tool_calls", None)
    if calls:
        out["tool_calls"] = [
            {key: call.get(key) for key in ("name", "args", "id")} for call in calls
        ]
    if kind == "tool":
        out |= {key: getattr(value, key, None) for key in ("name", "tool_call_id", "status")}
    return out


def print_json(value: Any, secrets: tuple[str, ...]) -> None:
    """Exactly one JSON document on stdout, nothing else; values are kept exact (JSON escapes
    every control character, so none reaches the terminal raw)."""
    text = json.dumps(value, ensure_ascii=False, indent=2, default=_plain)
    sys.stdout.write(printable_json(redact(text, *secrets)) + "\n")
    sys.stdout.flush()
