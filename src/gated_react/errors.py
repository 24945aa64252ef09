"""The one exception base, and the one-line forms of errors that users and models are shown.

Every exception this package raises for a caller derives from ``GatedReactError`` and keeps
its ordinary base too (``ThreadExists`` is still a ``ValueError``), so ``except
GatedReactError`` catches exactly ours. This module imports nothing heavy: the CLI's start-up
path uses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gated_react.redact import redact

if TYPE_CHECKING:
    from pydantic import ValidationError


class GatedReactError(Exception):
    """Base of every exception gated-react raises on purpose; its message is one line."""


def one_line(text: object) -> str:
    """``text`` with all whitespace (newlines included) folded into single spaces."""
    return " ".join(str(text).split())


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
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
