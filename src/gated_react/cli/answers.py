"""A human's answer from the command line (``resume``, ``answer``): read from the flags, each
JSON object checked as the model's calls are, and the question it answers: named, or the only
one the run waits on; none when the run has ended or does not wait."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from typing import Any

from gated_react.cli.exits import CliError, Exit
from gated_react.cli.live import render
from gated_react.cli.live.session import Result, exit_code
from gated_react.store.locks import thread_lock


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


MAX_DEPTH = 64
"""How deeply an answer's JSON may nest (deeper: one line, not a ``RecursionError`` from
whatever walks it next)."""


def json_object(flag: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text, object_pairs_hook=_once, parse_constant=_no_constant)
    except RecursionError:
        raise CliError(f"{flag} nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise CliError(f"{flag} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CliError(f"{flag} must be a JSON object, got {type(value).__name__}")
    if _depth(value) > MAX_DEPTH:
        raise CliError(f"{flag} nests deeper than {MAX_DEPTH} levels")
    return value


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are each given once: a human's answer is read as the model's call
    is (two values for one key were taken last-wins, the first never seen)."""
    found = dict(pairs)
    if len(found) != len(pairs):
        twice = next(key for key, n in Counter(key for key, _ in pairs).items() if n > 1)
        raise ValueError(f"key {twice!r} is given twice")
    return found


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth(value: Any) -> int:
    """How deeply ``value`` nests (walked without recursion)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            items = item.values() if isinstance(item, dict) else item
            todo.extend((inner, depth + 1) for inner in items)
    return deepest


def settled(current: Result, answer: Any, thread: str, saver: Any = None) -> Exit | None:
    """The exit code when nothing should run: finished, or waiting and no answer given. An
    answer for a thread with no question is refused: as one another run is advancing (it may
    be about to ask) when ``saver`` holds it so, else as one that does not wait."""
    if current.get("status") not in (None, "paused"):  # paused: a waiting run, not an ended one
        if answer is not None:
            raise CliError(
                f"thread {thread!r} has ended ({current.get('stop_reason')}); nothing to approve"
            )
        return exit_code(current)
    if current.get("pending"):
        return Exit.PAUSED if answer is None else None
    if answer is not None:
        if saver is not None:
            with contextlib.suppress(OSError), thread_lock(saver, thread):  # else ThreadBusy
                pass  # a store whose locks cannot be taken (read-only) is not known busy
        raise CliError(
            f"thread {thread!r} is not waiting for an approval; "
            f"resume it without --approve/--reject/--args/--respond/--answer"
        )
    return None


def asked_question(
    result: Any, thread: str, question: str | None, answer: Any, saver: Any
) -> dict[str, Any]:
    """The open question the answer is for; one line if there is none, it is not the one
    named (answered already: a command run twice never answers the next question), or the
    run waits on several and none is named."""
    settled(result, answer, thread, saver)  # ended, busy or not waiting: one line naming why
    pending = [q for q in result.get("pending") or () if isinstance(q, dict)]
    if question is not None:
        chosen = [q for q in pending if q.get("id") == question]
        if not chosen:
            ids = ", ".join(str(q.get("id")) for q in pending)
            raise CliError(
                f"thread {thread!r} does not wait on question {question!r} (answered "
                f"already?); it waits on {ids}: gated-react show {render.shell_word(thread)}"
            )
        return chosen[0]
    if len(pending) != 1:
        raise CliError(
            f"thread {thread!r} waits on {len(pending)} questions; name one with --question ID "
            "(gated-react questions lists them)"
        )
    return pending[0]
