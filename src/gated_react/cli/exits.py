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
    ``CliError``: one line, secrets masked, exit 1. (``gated_react.records``' errors that
    reach the app unconverted get the same line and exit code there.)"""
    try:
        yield
    except CliError:
        raise
    except GatedReactError as exc:
        raise CliError(exception_line(exc)) from None
