"""Exit codes and the one-line errors a user can cause."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

from gated_react.errors import GatedReactError, exception_line, one_line, printable


class Exit(IntEnum):
    """What ``gated-react`` exits with."""

    OK = 0
    """The command did its job; for a run: a final answer (``success``)."""
    ERROR = 1
    """The command could not start: bad input, configuration, store or thread. Nothing ran.
    Also a store that fails mid-run (disk full, read-only, connection lost): what it stored
    before is kept, and ``resume`` continues from there."""
    POLICY = 2
    """The policy stopped the run (budget, allowlist, loop, rejection, invalid action)."""
    FAILURE = 3
    """A model or tool failed (``llm_*``, ``tool_error``, ``tool_timeout``, ...)."""
    PAUSED = 4
    """The run waits for a human to approve a tool call (``gated-react resume``)."""
    INTERRUPTED = 130
    """Ctrl-C: the run is saved and can be resumed."""


class CliError(GatedReactError):
    """A problem the user can fix; shown as one line on stderr."""

    def __init__(self, message: str, code: Exit = Exit.ERROR) -> None:
        super().__init__(message)
        self.code = code


def say_error(message: str) -> None:
    """Print ``gated-react: error: ...`` on stderr, as one line a terminal cannot act on."""
    sys.stderr.write(f"gated-react: error: {printable(one_line(message))}\n")
    sys.stderr.flush()


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the library's own errors (a store, model, thread or example the user named) into
    ``CliError``: one line, secrets masked, exit 1."""
    try:
        yield
    except CliError:
        raise
    except GatedReactError as exc:
        raise CliError(exception_line(exc)) from None


# Database drivers whose errors mean the run store itself failed while in use.
_STORE_DRIVERS = frozenset({"sqlite3", "psycopg", "psycopg_pool"})


@contextmanager
def readable(thread: str) -> Iterator[None]:
    """Reading what a thread stored: rows this version cannot decode (a damaged file, or rows
    written by another program) are one line naming the thread, exit 1; the store itself
    failing and our own errors pass through to their handlers. A value the serializer refused
    to revive (``gated_react.serializer``) names the thread too."""
    from gated_react.serializer import UnsafeCheckpoint  # the store is open: LangGraph is loaded

    try:
        yield
    except UnsafeCheckpoint as exc:
        raise CliError(f"thread {thread!r}: its stored checkpoint cannot be read: {exc}") from None
    except GatedReactError:
        raise
    except Exception as exc:
        if store_failure(exc) is not None:
            raise
        name, why = type(exc).__name__, exception_line(exc, first_only=True)
        raise CliError(
            f"thread {thread!r}: its stored checkpoint cannot be read "
            f"({name if why == name else f'{name}: {why}'}); the store is damaged or was "
            "written by another program or version"
        ) from None


def store_failure(exc: BaseException) -> str | None:
    """One line for a store that failed in use (disk full, read-only file, lost connection);
    None for any other exception."""
    if type(exc).__module__.partition(".")[0] not in _STORE_DRIVERS:
        return None
    return exception_line(exc, first_only=True)
