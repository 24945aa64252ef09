"""While the model (or a tool) works, a terminal shows what the run waits on and for how long."""

from __future__ import annotations

import io

from langchain_core.messages import AIMessage
from rich.console import Console

from gated_react.cli.live.waiting import MODEL, Waiting, _Elapsed, next_wait
from gated_react.records.events import Tracker


def _event(node: str, update: dict) -> object:  # type: ignore[type-arg]
    return Tracker("t").event(node, update)


def _step(**held: object) -> dict:  # type: ignore[type-arg]
    """An update writing the step in hand (as stored: plain JSON)."""
    return {"step": {"run": "q", **held}}


def test_the_model_is_waited_on_after_observe_and_a_retry_a_tool_after_the_gate() -> None:
    assert next_wait(_event("observe", {})) == MODEL  # type: ignore[arg-type]
    retry = _step(retry={"why": "no_action", "message": "m", "count": 1})
    assert next_wait(_event("validate", retry)) == MODEL  # type: ignore[arg-type]
    call = _step(calls=[{"id": "c", "tool": "search\x1b[2J", "args": {}, "key": "k"}])
    assert next_wait(_event("gate", call)) == "running search\\x1b[2J"  # type: ignore[arg-type]
    finished = {"status": "ok", "stop_reason": "success", "messages": [AIMessage("a")]}
    assert next_wait(_event("finish", finished)) is None  # type: ignore[arg-type]


def test_a_terminal_sees_the_line_and_then_it_goes_away() -> None:
    out = io.StringIO()
    waiting = Waiting(Console(file=out, force_terminal=True, width=80))
    waiting.start(MODEL)
    waiting.stop()
    assert f"{MODEL}, 0 s" in out.getvalue()
    assert waiting.live is None


def test_the_line_counts_the_seconds_since_it_started() -> None:
    line = _Elapsed(MODEL)
    line.started -= 12.4
    assert line.__rich__().plain.endswith(f"{MODEL}, 12 s")


def test_nothing_is_drawn_when_the_output_is_not_a_terminal() -> None:
    out = io.StringIO()
    waiting = Waiting(Console(file=out, force_terminal=False))
    waiting.start(MODEL)
    waiting.stop()
    assert out.getvalue() == ""
