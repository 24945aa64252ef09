"""Fake tools shared by node, end-to-end and graph tests: a side effect that records what it
sent, a slow tool, one that always fails and one that fails twice before it works."""

from __future__ import annotations

import time
from typing import Annotated, Any

from langchain_core.tools import InjectedToolArg, tool

from gated_react.tools._meta import idempotent

SENT: list[dict[str, Any]] = []
FLAKY: list[int] = []


@tool
def send_email(to: str, idempotency_key: Annotated[str, InjectedToolArg]) -> str:
    """Send an email (not idempotent)."""
    SENT.append({"to": to, "key": idempotency_key})
    return f"sent to {to}"


@tool
def slow(seconds: float) -> str:
    """Sleep."""
    time.sleep(seconds)
    return "woke"


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


@idempotent
@tool
def flaky() -> str:
    """Fails twice, then works."""
    FLAKY.append(1)
    if len(FLAKY) < 3:
        raise ConnectionError("try again")
    return "finally"
