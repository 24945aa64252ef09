"""The one exception base, and the one-line forms of errors that users and models are shown.

Every exception this package raises for a caller derives from ``GatedReactError`` and keeps
its ordinary base too (``ThreadExists`` is still a ``ValueError``), so ``except
GatedReactError`` catches exactly ours. This module imports nothing heavy: the CLI's start-up
path uses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Self

from gated_react.redact import redact

if TYPE_CHECKING:
    from pydantic import ValidationError


class GatedReactError(Exception):
    """Base of every exception gated-react raises on purpose; its message is one line."""


class MiddlewareRefused(GatedReactError, ValueError):
    """A LangChain middleware ``build_graph`` does not take (the gate does its job, or it would
    get past the gate); the one-line message names the equivalent."""


class ArgumentRefused(GatedReactError, TypeError):
    """An argument of ``create_agent`` that ``build_graph`` does not take; the one-line message
    names what does its job here."""


class MiddlewareFailed(GatedReactError):
    """A middleware hook raised, or returned what it may not: the run stops with
    ``middleware_error:<name>``."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"{name}: {why}")
        self.name = name

    @classmethod
    def of(cls, name: str, hook: str, exc: BaseException, secrets: tuple[str, ...]) -> Self:
        """The failure of a hook that raised ``exc`` (its message masked and shortened)."""
        text = shorten(exception_line(exc, *secrets), 300)
        return cls(name, f"{hook} raised {type(exc).__name__}: {text}")


class StoreError(GatedReactError):
    """The run store cannot be opened; the message is one line and carries no password."""


class Unrecorded(GatedReactError):
    """A beat could not be written (the store's connection was lost, or it failed): the call
    under way is abandoned as a crash would leave it, since time nobody records would be
    free; the run goes on where its record says when it is resumed (workers retry it)."""


class MisroutedStep(GatedReactError, RuntimeError):
    """A node was reached in a state the graph itself never leaves it in: a caller's
    ``Command(goto=...)`` or an edit through LangGraph's state API sent it there. Nothing ran
    and nothing was written; a new message (or goal) on the thread starts a new run."""

    def __init__(self, node: str, why: str) -> None:
        super().__init__(
            f"{node} was reached {why}, which only a Command(goto=...) or a state edit does; "
            "nothing ran and the thread is unchanged: send a new message (or goal) to start "
            "a new run on it"
        )
        self.node = node


class StrandedThread(MisroutedStep):
    """A thread a release before 0.1.0 left paused or killed inside a step: the step it was in
    was never recorded, so no answer can continue it (what its last call did is unknown).
    Refused before anything is written; a new message (or goal) starts a new run on it."""

    def __init__(self, thread_id: str, node: str) -> None:
        line = f"{stranded_line(thread_id, node)}; nothing ran and the thread is unchanged"
        GatedReactError.__init__(self, line)
        self.node, self.thread_id = node, thread_id


def stranded_line(thread_id: str, node: str) -> str:
    """What a person reads of a thread a release before 0.1.0 left in a step."""
    unknown = "; whether its last tool call ran is unknown" if node == "execute" else ""
    return (
        f"thread {thread_id!r} was left at {node} by gated-react before 0.1.0, which recorded "
        f"no step to continue{unknown}: no answer can continue it; send a new message (or "
        "goal) to start a new run on it, e.g. ask its question again"
    )


def causes(exc: BaseException, depth: int = 8) -> Iterator[BaseException]:
    """``exc`` and what it was raised from or during, nearest first (at most ``depth``):
    libraries wrap a driver's error (procrastinate's ``ConnectorException`` carries psycopg's)."""
    seen: BaseException | None = exc
    for _ in range(depth):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__ or seen.__context__


def one_line(text: object) -> str:
    """``text`` with all whitespace (newlines included) folded into single spaces."""
    return " ".join(str(text).split())


# What a terminal acts on instead of printing: C0 controls but tab and newline (ESC starts cursor
# moves, screen clears and window titles; CR overwrites a line), DEL, C1 controls (0x9b is an
# 8-bit ESC [) and the bidi overrides that make a line read other than it is.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: every control character but newline and tab is
    shown as an escape (``\\x1b``, ``\\u202e``), so text from a model, a tool or a store cannot
    move the cursor, clear the screen or retitle the window, and stays readable."""
    return _CONTROLS.sub(_escaped, text.replace("\r\n", "\n"))


# JSON leaves these raw too; the Unicode line and paragraph separators are line breaks to
# ``str.splitlines()`` and to many log collectors: one event would read as several.
_JSON_RAW = re.compile(f"[{_CONTROLS.pattern[1:-1]}\u2028\u2029]")


def printable_json(text: str) -> str:
    """JSON text with the characters ``json.dumps`` leaves raw (DEL, C1, bidi overrides, the
    line separators U+2028 and U+2029) written as ``\\u`` escapes: the same JSON value, on one
    line, safe to print or ``tail -f``."""
    return _JSON_RAW.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def exception_line(exc: BaseException, *secrets: str | None, first_only: bool = False) -> str:
    """An exception's message as one line with secrets masked (``redact``); never raises.

    ``first_only`` keeps just the first line: driver errors (sqlite, psycopg) put the useful
    sentence there and add a query or a hint below it, and an empty first line gives the class
    name instead.
    """
    try:
        message = str(exc).strip()
    except Exception:  # a broken __str__ must not turn a failure into a crash
        message = "(message cannot be shown)"
    if first_only:
        message = message.splitlines()[0] if message else ""
    line = redact(one_line(message), *secrets)
    if first_only:
        return line or type(exc).__name__
    return line


def validation_line(
    exc: ValidationError | Iterable[Mapping[str, Any]],
    *,
    root: str = "value",
    limit: int = 5,
    show_input: bool = False,
) -> str:
    """A pydantic validation error as ``where: problem; ...`` on one line, at most ``limit``
    problems. ``root`` names a problem with an empty location; ``show_input`` adds the
    offending value, shortened (never for a missing field, which has none)."""
    errors = exc.errors() if hasattr(exc, "errors") else list(exc)
    parts = []
    for error in list(errors)[:limit]:
        where = ".".join(str(part) for part in error["loc"]) or root
        got = ""
        if show_input and error["type"] != "missing":
            got = f" (got {_short(error.get('input'))})"
        parts.append(f"{where}: {error['msg']}{got}")
    return "; ".join(parts)


def _short(value: Any, limit: int = 40) -> str:
    return shorten(repr(value), limit)


def shorten(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters ending in ``...`` when it is longer."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
