"""What a person sees: one line per node while a run goes, then a summary."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gated_react.cli.live.events import Event, clip
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
        row.add_row(str(event.step), event.node, decision, escape(self._detail(event)), used)
        self.console.print(row, highlight=False)

    def _detail(self, event: Event) -> str:
        action = event.action or {}
        parts = []
        if action.get("tool"):
            args = action.get("args")
            parts.append(f"{action['tool']} {clip(args, 60)}" if args else str(action["tool"]))
        for key in ("final", "text", "why", "tools"):
            if action.get(key):
                parts.append(clip(action[key], 70))
        if event.observation:
            parts.append(f"→ {clip(event.observation, 70)}")
        if event.stop_reason:
            parts.append(f"[{event.stop_reason}]")
        return redact(" ".join(parts), *self.secrets)


def header(console: Console, rows: list[tuple[str, str]]) -> None:
    """The lines printed before a run starts: thread, model, store, log."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="dim")
    table.add_column(style="dim", overflow="fold")
    for key, value in rows:
        table.add_row(key, escape(value))
    console.print(table, highlight=False)


def budgets(event: Event, budget: Any) -> str:
    """``steps 2/8 · tools 1/6 · 0.4/20s · 512 tok``: used/limit."""
    tokens = f"{event.tokens}/{budget.max_tokens}" if budget.max_tokens else f"{event.tokens}"
    return (
        f"steps {event.step}/{budget.max_steps} · tools {event.tool_calls}/"
        f"{budget.max_tool_calls} · {event.seconds:.1f}/{budget.max_seconds:g}s · "
        f"{tokens} tok"
    )


def summary(
    console: Console, result: dict[str, Any], budget: Any, secrets: tuple[str, ...]
) -> None:
    """The end of a run: status, stop reason, answer, steps, tool calls, tokens, seconds."""
    usage = result.get("usage") or {}
    status = result.get("status") or ("paused" if result.get("pending") else "unfinished")
    color = {"ok": "green", "paused": "yellow"}.get(status, "red")
    rows = [
        ("status", f"[{color}]{status}[/]"),
        ("stop reason", escape(str(result.get("stop_reason") or "-"))),
        ("message", escape(redact(str(result.get("message") or ""), *secrets))),
        ("answer", escape(redact(str(result.get("answer") or ""), *secrets))),
        ("steps", f"{usage.get('steps', 0)}/{budget.max_steps}"),
        ("tool calls", f"{len(result.get('history') or ())}/{budget.max_tool_calls}"),
        ("tokens", str(usage.get("tokens", 0))),
        ("seconds", f"{float(usage.get('seconds', 0.0)):.2f}/{budget.max_seconds:g} (active)"),
        ("thread", escape(str(result.get("thread_id")))),
    ]
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        if value:
            table.add_row(key, value)
    console.print()
    console.print(table, highlight=False)


def pending(console: Console, result: dict[str, Any], resume_cmd: str) -> None:
    """A paused run: what waits for approval and the three ways to answer."""
    example = "{...}"
    for question in result.get("pending") or ():
        if not isinstance(question, dict):
            continue
        args = question.get("args")
        example = json.dumps(args, ensure_ascii=False) if isinstance(args, dict) else example
        console.print(
            f"[bold yellow]waiting for approval:[/] {escape(str(question.get('tool')))} "
            f"{escape(json.dumps(args, ensure_ascii=False))}",
            highlight=False,
        )
        for key in ("why", "error"):
            if question.get(key):
                console.print(f"  {key}: {escape(str(question[key]))}", highlight=False)
    cmd = escape(resume_cmd)
    console.print(
        f"  approve: {cmd} --approve\n"
        f"  reject:  {cmd} --reject 'why'\n"
        f"  edit:    {cmd} --args {escape(shlex.quote(example))}",
        highlight=False,
        soft_wrap=True,
    )


def print_json(value: Any, secrets: tuple[str, ...]) -> None:
    """Exactly one JSON document on stdout, nothing else."""
    text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write(redact(text, *secrets) + "\n")
    sys.stdout.flush()
