"""Node updates turned into events: what the live view shows and the run log records.

``Tracker`` follows one thread through LangGraph's ``stream_mode="updates"`` chunks, streamed
with every channel (``runs.run``'s stream does), so the private ``step`` each node hands the
next is seen.
What a single update does not carry is read from the run's record (``runs.run_book``): the
steps, tool calls, tokens, seconds and dollars so far, the budgets a human extended, what the
run ran under.

The decision shown after decide, validate, gate and observe is the branch the graph's own router
(``gated_react.routing``) takes on the step in hand, in the word the CLI shows for it: a change
to a node and its router needs no second edit here. A call the gate refused and shows the model
why is a call of the step with ``shown``: the gate's word for it is ``allowed`` (it goes on to
execute, which answers it), its observation the refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

from gated_react import routing
from gated_react.records.described import Step, describe, execute_word, said
from gated_react.records.run_log import FIELDS
from gated_react.redact import redact

DECIDE_WORDS: dict[routing.AfterDecide, str] = {"reply": "proposed", "stop": "failed"}
"""The decision shown for each branch of ``routing.after_decide``."""
VALIDATE_WORDS: dict[routing.AfterValidate, str] = {
    "tool": "tool",
    "final": "final",
    "retry": "retry",
    "stop": "invalid",
}
"""The decision shown for each branch of ``routing.after_validate``."""
GATE_WORDS: dict[routing.AfterGate, str] = {
    "allowed": "allowed",
    "stop": "stopped",
}
"""The decision shown for each branch of ``routing.after_gate``."""
OBSERVE_WORDS: dict[routing.AfterObserve, str] = {
    "next": "next",
    "direct": "answered",
    "stop": "stopped",
}
"""The decision shown for each branch of ``routing.after_observe``."""
_ROUTED: dict[str, tuple[str, Mapping[Any, str], Mapping[Any, str]]] = {
    "decide": ("after_decide", routing.AFTER_DECIDE, DECIDE_WORDS),
    "validate": ("after_validate", routing.AFTER_VALIDATE, VALIDATE_WORDS),
    "gate": ("after_gate", routing.AFTER_GATE, GATE_WORDS),
    "observe": ("after_observe", routing.AFTER_OBSERVE, OBSERVE_WORDS),
}
"""Each routed node's router (by name: looked up when used), its path map and its words."""


def masked(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` with secrets (known shapes and ``secrets``) masked in every string."""
    if isinstance(value, str):
        return redact(value, *secrets)
    if isinstance(value, dict):
        return {key: masked(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [masked(item, secrets) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened in a run."""

    time: str
    thread: str
    step: int
    node: str
    action: dict[str, Any] | None
    decision: str | None
    stop_reason: str | None
    tokens: int
    seconds: float
    tool_calls: int
    observation: str | None = None
    message: str | None = None
    cost: float | None = None
    """US dollars spent so far; None when unpriced."""
    context: dict[str, Any] | None = None
    """What the run ran under (``RunContext``, from its record), on the event that opened it."""

    def record(self) -> dict[str, Any]:
        """The run-log line: the fixed fields first, optional ones only when set."""
        out = {name: getattr(self, name) for name in FIELDS}
        out["seconds"] = round(self.seconds, 3)
        out["tool_calls"] = self.tool_calls
        for name in ("observation", "message", "cost", "context"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True, slots=True)
class Uncounted:
    """An event before the run's record is read for its counters (``Tracker.counted``)."""

    event: Event
    opens: bool = False
    """The update opened a run: its event carries what the run runs under."""


@dataclass
class Tracker:
    """Follows one thread; ``event(node, update)`` for every streamed update. ``saver``: the
    checkpointer the run is stored in, whose record holds the counters (None: no record, the
    counters stay 0). A host whose saver is async reads the record itself: ``uncounted`` for
    the update, then ``counted`` with the run's book (``runs.arun_book``)."""

    thread: str
    saver: Any = None
    secrets: tuple[str, ...] = ()
    """Keys to mask in every text before it is clipped, so no cut leaves part of one."""
    held: Step = field(default_factory=dict)
    """The step in hand as the last update that wrote it left it."""
    next_node: str | None = None
    """Where the graph went after the last event (the node a question comes from)."""

    def book(self) -> Any:
        """The record of the thread's latest run, read up to now (``runs.run_book``; sync
        savers); None without a saver."""
        from gated_react.runs import run_book

        return run_book(self.saver, self.thread) if self.saver is not None else None

    @property
    def extensions(self) -> list[dict[str, Any]]:
        """The budget extensions a human granted the run, from its record (plain JSON)."""
        book = self.book()
        granted = book.tally.extensions if book is not None else []
        return [extension.model_dump(mode="json") for extension in granted]

    def event(self, node: str, update: Any) -> Event:
        return self.counted(self.uncounted(node, update), self.book())

    def make(self, node: str, **fields: Any) -> Event:
        """A run-level event (started, resumed, interrupted) with the counters so far."""
        return self.counted(Uncounted(_event(self.thread, node, **fields)), self.book())

    def uncounted(self, node: str, update: Any) -> Uncounted:
        """What ``update`` says, without reading anything."""
        if node == "__interrupt__":
            return Uncounted(self._asked(update))
        update = masked(_plain(update), self.secrets)
        if isinstance(update.get("step"), dict):
            self.held = update["step"]
        branch, decision = _branch(node, self.held)
        action, observation = describe(node, self.held, update, branch)
        self.next_node = _after(node, branch)
        ending = self.held.get("ending") or {}
        stop = update.get("stop_reason") if node in ("finish", "stop") else None
        if node == "stop":
            stop = stop or ending.get("reason")
        said = _event(self.thread, node, action=action, decision=decision, stop_reason=stop,
                      observation=observation, message=update.get("message"))  # fmt: skip
        return Uncounted(said, opens=node == "decide" and _opens(update))

    def counted(self, uncounted: Uncounted, book: Any) -> Event:
        """The event with the run's counters (and, on the event that opened the run, what it
        runs under) as ``book`` has them (None: no record, counters 0)."""
        from gated_react.state import Usage

        usage = book.tally.usage() if book is not None else Usage()
        opened = book.tally.opened if book is not None else None
        context = None
        if uncounted.opens and opened is not None:
            context = masked(dict(opened.body), self.secrets)
        return replace(
            uncounted.event,
            step=usage.steps,
            tokens=usage.tokens,
            seconds=usage.seconds,
            tool_calls=usage.tool_calls,
            cost=usage.cost,
            context=context,
        )

    def _asked(self, update: Any) -> Event:
        """A question the run waits on, as the node that asked it (the one the graph went to
        after the last event; a resumed run asks again where it waited)."""
        found = list(update or ())
        value = getattr(found[0], "value", {}) if found else {}
        value = masked(value if isinstance(value, dict) else {}, self.secrets)
        action = {"kind": value.get("kind"), "tool": value.get("tool"), "args": value.get("args")}
        node = self.next_node
        if node is None:
            node = "execute" if value.get("kind") == "outcome_unknown" else "gate"
        return _event(self.thread, node, action=action, decision="paused")


def _event(thread: str, node: str, **fields: Any) -> Event:
    """An event now, its counters 0 (``Tracker.counted`` fills them)."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    described = {"action": None, "decision": None, "stop_reason": None} | fields
    return Event(time=now, thread=thread, step=0, node=node, tokens=0, seconds=0.0,
                 tool_calls=0, **described)  # fmt: skip


def _branch(node: str, step: Step) -> tuple[str | None, str | None]:
    """The branch the graph's router takes on the step after ``node``, and its word (the
    words of the nodes that end a run, or none)."""
    if node == "execute":
        return None, execute_word(step)
    found = _ROUTED.get(node)
    if found is None:
        return None, _ENDS.get(node)
    name, _, words = found
    branch = getattr(routing, name)(_route(step))
    return branch, words[branch]


_ENDS = {"finish": "answered", "stop": "stopped"}


def _after(node: str, branch: str | None) -> str | None:
    """The node the graph goes to after ``node`` took ``branch``."""
    if node == "execute":
        return "observe"
    found = _ROUTED.get(node)
    return None if found is None else found[1][branch]


def _plain(update: Any) -> dict[str, Any]:
    """A node's update with its messages as their type and text (so secrets in them are masked
    like any other text); a node that wrote nothing as an empty update."""
    if not isinstance(update, dict):
        return {}
    written = update.get("messages")
    written = getattr(written, "value", written)  # an Overwrite: the messages it writes
    if not isinstance(written, list | tuple):
        return update
    said = [{"type": getattr(m, "type", None), "text": _text(m)} for m in written]
    return {**update, "messages": said}


def _text(message: Any) -> str:
    text = getattr(message, "text", "")
    return str(text)


def _opens(update: dict[str, Any]) -> bool:
    """A decision that opens a run writes its question (a goal made the human message)."""
    return bool(said(update, "human"))


def _route(step: Step) -> routing.Route:
    """The step as the routers read it (plain JSON, as stored)."""
    return cast("routing.Route", {"step": step})
