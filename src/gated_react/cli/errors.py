"""Exit codes and the one-line errors a user can cause."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum


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


class CliError(Exception):
    """A problem the user can fix; shown as one line on stderr."""

    def __init__(self, message: str, code: Exit = Exit.ERROR) -> None:
        super().__init__(message)
        self.code = code


def one_line(text: str) -> str:
    """Collapse whitespace so a message is exactly one line."""
    return " ".join(str(text).split())


def say_error(message: str) -> None:
    """Print ``gated-react: error: ...`` on stderr."""
    sys.stderr.write(f"gated-react: error: {one_line(message)}\n")
    sys.stderr.flush()


# Exceptions a user causes, by class name so this module imports nothing heavy.
_USER_ERRORS = frozenset(
    {
        "StoreError",
        "ModelNotConfigured",
        "UnknownThread",
        "ThreadExists",
        "ThreadBusy",
        "LocalModelUnavailable",
    }
)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors a user can cause into ``CliError`` (one line, exit 1)."""
    try:
        yield
    except CliError:
        raise
    except Exception as exc:
        if type(exc).__name__ not in _USER_ERRORS:
            raise
        from gated_react.redact import redact

        raise CliError(redact(str(exc))) from None


# Database drivers whose errors mean the run store itself failed while in use.
_STORE_DRIVERS = frozenset({"sqlite3", "psycopg", "psycopg_pool"})


def store_failure(exc: BaseException) -> str | None:
    """One line for a store that failed in use (disk full, read-only file, lost connection);
    None for any other exception."""
    if type(exc).__module__.partition(".")[0] not in _STORE_DRIVERS:
        return None
    from gated_react.redact import redact

    lines = str(exc).strip().splitlines()
    return redact(one_line(lines[0]) if lines else type(exc).__name__)
