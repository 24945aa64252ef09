"""The line a terminal shows while nothing else happens: what the run waits on, and for how long.

A model server that hangs would otherwise leave the screen silent until the budget runs out.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from gated_react.cli.live.render import plain
from gated_react.records.events import GATE_WORDS, OBSERVE_WORDS, VALIDATE_WORDS, Event

MODEL = "waiting for the model"


def next_wait(event: Event) -> str | None:
    """What the run waits on after ``event``: the model, a tool, or nothing worth a line."""
    if (event.node, event.decision) in {
        ("observe", OBSERVE_WORDS["next"]),
        ("validate", VALIDATE_WORDS["retry"]),
    }:
        return MODEL
    if (event.node, event.decision) == ("gate", GATE_WORDS["allowed"]):
        action = event.action or {}
        if action.get("tools"):
            return f"running {len(action['tools'])} tools at once"
        tool = action.get("tool")
        return f"running {plain(tool, limit=60)}" if tool else "running the tool"
    return None


class _Elapsed:
    """Renders ``what`` with the whole seconds since it started, at every refresh."""

    def __init__(self, what: str) -> None:
        self.what, self.started = what, time.monotonic()

    def __rich__(self) -> Text:
        return Text(f"      … {self.what}, {time.monotonic() - self.started:.0f} s", style="dim")


class Waiting:
    """A transient line, on a terminal only (logs and pipes get no spinner text)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live: Live | None = None

    def start(self, what: str | None) -> None:
        self.stop()
        if what is None or not self.console.is_terminal:
            return
        self.live = Live(_Elapsed(what), console=self.console, transient=True, refresh_per_second=2)
        self.live.start()

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
