"""Fakes shared by node, end-to-end and graph tests: a side effect that records what it sent, a
slow tool, one that always fails, one that fails twice before it works, a payment (not
idempotent) and a metered lookup (idempotent) that log to ``RAN``, a model that hangs, and
a payment a test holds while it runs (``Payments``).
``RAN`` is where a module's own side-effect tools say what they ran; tests/conftest.py empties
these logs before every test."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolArg, tool
from pydantic import Field

from gated_react.tools._meta import idempotent

SENT: list[dict[str, Any]] = []
FLAKY: list[int] = []
RAN: list[str] = []


@tool
def pay(item: str) -> str:
    """Pays (not idempotent)."""
    RAN.append(f"pay {item}")
    return f"paid {item}"


@idempotent
@tool
def lookup(q: str) -> str:
    """An idempotent tool whose calls are counted (a metered API)."""
    RAN.append(f"lookup {q}")
    return f"result for {q}"


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


class HangingChatModel(BaseChatModel):
    """A model server that accepted the request and never answers (until ``release``)."""

    release: threading.Event = Field(default_factory=threading.Event)

    @property
    def _llm_type(self) -> str:
        return "hanging"

    def _generate(self, messages: Any, stop: Any = None, **kwargs: Any) -> ChatResult:
        self.release.wait(60)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="late"))])

    async def _agenerate(self, messages: Any, stop: Any = None, **kwargs: Any) -> ChatResult:
        await asyncio.sleep(60)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="late"))])


class Payments:
    """A ``pay`` tool that is not idempotent and says when a call starts: ``made`` holds the
    orders it paid, ``started`` is set as a call starts, and a call that ``holds`` waits for
    ``release`` (set it to let the call return)."""

    def __init__(self, holds: bool = True) -> None:
        self.made: list[str] = []
        self.started, self.release = threading.Event(), threading.Event()
        self.holds = holds

        @tool
        def pay(order: str) -> str:
            """Pay an order."""
            self.made.append(order)
            self.started.set()
            if self.holds:
                self.release.wait(60)
            return f"paid {order}"

        self.tool = pay
