"""What a run has spent, summed from its records as they are read: model calls (a call made and not
yet paid counts at its estimate, so one paid before a crash is never free), tokens, dollars,
active seconds (a call's so far while it runs), tool calls by tool; the permits that verify, the
budgets a human extended, and how the run ended. Nothing here is read from the run's state.

Sums are kept as records arrive, so reading a run's spend costs the same at any length."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from gated_react._engine.authority.records import Kind, Record
from gated_react.state import Extension, Usage

_SUMMED = ("tokens", "estimated", "cached", "input", "output")
_SPENDING = frozenset({Kind.MODEL, Kind.PAID, Kind.RUNNING, Kind.DONE})
"""The records a run's tokens, dollars and seconds are summed from."""


@dataclass
class Tally:
    """A run's records, summed as they arrive (``add``)."""

    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What each model call counts for, by its id: its estimate until paid, then what it cost."""
    sums: dict[str, float] = field(default_factory=dict)
    unpriced: dict[str, str] = field(default_factory=dict)
    """The model calls that could not be priced, by id, and why."""
    unbilled: set[str] = field(default_factory=set)
    """Attempts the server refused or that never left (no model call, no step)."""
    replyless: set[str] = field(default_factory=set)
    """Model calls settled without a reply (a reply lost on its way back): paid for at their
    estimate, as they may have been, but no decision was made: no step."""
    seconds: float = 0.0
    running: dict[tuple[str, str], float] = field(default_factory=dict)
    """The calls under way, by key and attempt: the seconds their latest beat said they had
    taken (a call killed and run again is two attempts: both count)."""
    counted: dict[str, str] = field(default_factory=dict)
    """Calls let through or shown to the model as refused, each once, by what it is (its id,
    tool and arguments: a forged call under a counted call's id is another call; the same call
    let through again, by a gate re-run after a crash or a replay, is the same): its tool."""
    per_tool: dict[str, int] = field(default_factory=dict)
    unstarted: dict[str, str] = field(default_factory=dict)
    """Calls let through that have not started (no ``started``, ``running`` or ``done`` yet),
    by id: what each is. A model call after them means they never ran: their step was lost
    with a killed process before it was stored, and the model was asked again."""
    superseded: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Calls let through that never ran, their step asked of the model again, by id: what each
    is and its tool. Not counted, not traced (unless a record says it started after all)."""
    permits: dict[str, Record] = field(default_factory=dict)
    """The latest permit that verifies and was not used yet (no ``done`` after it), by call
    id: a permit lets its call run once."""
    asked: set[str] = field(default_factory=set)
    """The calls a human was asked about (``identity``), of any signature: a forged one only
    makes the gate ask again."""
    extensions: list[Extension] = field(default_factory=list)
    """Budgets a human extended (only records that verify: they raise a limit)."""
    opened: Record | None = None
    ended: Record | None = None
    unkeyed: bool = False
    """The store has no key: each process signs with a key of its own, so a record another
    process wrote never verifies, and none can be told from a forgery either. A payment is
    then taken as recorded (a store without a key protects nothing; the run's own figures
    are the ones to show). With a key, one that does not verify can only raise the figures, and
    puts them in doubt (``doubted``)."""
    doubted: str | None = None
    """With a key: why the spend is in doubt, the first record of it that does not verify
    (edited, forged or copied). The honest record it replaced is gone, so the figures can be
    shown to be no lower than those recorded, not what they were: a limit on them cannot be
    checked (``budgets.check_doubt``)."""

    _usage: Usage | None = field(default=None, init=False, repr=False, compare=False)
    """``usage()`` as last made, until the next record (a step asks for it three times)."""

    def add(self, record: Record) -> None:
        self._usage = None
        kind = record.kind
        if kind in _SPENDING and not (record.verified or self.unkeyed or self.doubted):
            self.doubted = (
                f"its {kind} record of {record.key} does not verify with the store key "
                "(edited, forged or copied)"
            )
        if kind is Kind.MODEL or kind is Kind.PAID:
            if kind is Kind.MODEL and self.unstarted and (record.verified or self.unkeyed):
                self._supersede()  # a forged model call uncounts nothing
            self._model(record)
        elif kind is Kind.PERMIT or kind is Kind.REFUSED:
            self._call(record)
        elif kind is Kind.DONE:
            self._ran(record, done=True)
            self.permits.pop(str(record.body.get("call")), None)  # used
        elif kind is Kind.RUNNING:
            self._ran(record, done=False)
        elif kind is Kind.STARTED:
            self._started(str(record.body.get("call")))
        elif kind is Kind.EXTENDED and record.verified:
            with contextlib.suppress(ValidationError):  # one this version cannot read: nothing
                self.extensions.append(Extension.model_validate(record.body))
        elif kind is Kind.ASKED:
            body = record.body
            self.asked.add(identity(str(body.get("call")), str(body.get("tool")),
                                    str(body.get("args_hash"))))  # fmt: skip
        elif kind is Kind.OPENED:
            self.opened = record
        elif kind is Kind.ENDED:
            self.ended = record

    def _ran(self, record: Record, *, done: bool) -> None:
        """A call's seconds: those it had taken at its last beat until its ``done`` record
        says how long it took (any record, of any signature, only raises them)."""
        self._started(str(record.body.get("call")))
        seconds = _amount(record.body.get("seconds")) or 0.0
        attempt = (record.key, str(record.body.get("attempt") or ""))
        before = self.running.pop(attempt, 0.0) if done else self.running.get(attempt, 0.0)
        if not done:
            self.running[attempt] = max(before, seconds)
        self.seconds += max(seconds - before, 0.0)

    def _model(self, record: Record) -> None:
        """A model call's figures: a verified ``paid`` record is final (what was paid replaces
        the estimate; an attempt refused unbilled is no call); until one arrives, every record
        about the call, of any signature, can only raise them."""
        key, before = record.key, self.models.get(record.key)
        if key in self.unbilled or (before is not None and before.get("final")):
            return  # counted once
        body: dict[str, Any] | None
        if record.kind is Kind.PAID and (record.verified or self.unkeyed):
            refused = record.body.get("unbilled") is True
            body = None if refused else dict(record.body, paid=True, final=True)
            if body is not None and body.get("failed") is True:
                self.replyless.add(key)
        else:
            shown = {} if record.body.get("unbilled") is True else record.body
            body = dict(shown, paid=record.kind is Kind.PAID)
            if before is not None:
                body = _not_lower(before, body)
        self._count(key, before, -1)
        if body is None:  # refused by the server, or never sent: only the time it took
            self.models.pop(key, None)
            self.unbilled.add(key)
            self.seconds += _amount(record.body.get("seconds")) or 0.0
            return
        self.models[key] = body
        self._count(key, body, 1)

    def _count(self, key: str, body: dict[str, Any] | None, sign: int) -> None:
        if body is None:
            return
        sums = self.sums
        for name in _SUMMED:
            amount = body.get(name)
            if type(amount) is not int:  # a record's own ints, counted inline
                amount = _whole(amount)
            if amount > 0:
                sums[name] = sums.get(name, 0) + sign * amount
        self.seconds += sign * (_amount(body.get("seconds")) or 0.0)
        cost = _amount(body.get("cost"))
        if cost is None:
            why = str(body.get("unpriced") or "a model call's cost is not known")
            if sign > 0:
                self.unpriced[key] = why
            else:
                self.unpriced.pop(key, None)
        else:
            self.sums["cost"] = self.sums.get("cost", 0.0) + sign * cost

    def _call(self, record: Record) -> None:
        body = record.body
        call, tool = str(body.get("call") or record.key), str(body.get("tool"))
        what = identity(call, tool, str(body.get("args_hash") or ""))
        if what not in self.counted:
            self.counted[what] = tool
            self.per_tool[tool] = self.per_tool.get(tool, 0) + 1
            self.superseded.pop(call, None)  # let through again: counted as any call
            if record.kind is Kind.PERMIT:
                self.unstarted[call] = what
        if record.kind is Kind.PERMIT and record.verified:
            self.permits[call] = record

    def _supersede(self) -> None:
        """The calls let through and never started before this model call: uncounted (a
        refused call stays counted: the model was shown it, and it counts against loops)."""
        for call, what in self.unstarted.items():
            tool = self.counted.pop(what)
            self.per_tool[tool] -= 1
            if not self.per_tool[tool]:
                del self.per_tool[tool]
            self.permits.pop(call, None)
            self.superseded[call] = (what, tool)
        self.unstarted.clear()

    def _started(self, call: str) -> None:
        """A call started (or ran, or finished): it counts, whatever came before."""
        self.unstarted.pop(call, None)
        if (found := self.superseded.pop(call, None)) is not None and found[0] not in self.counted:
            what, tool = found
            self.counted[what] = tool
            self.per_tool[tool] = self.per_tool.get(tool, 0) + 1

    def usage(self) -> Usage:
        """The run's usage, as the budgets count it (one object until the next record: a copy is
        what a caller changes)."""
        if self._usage is not None:
            return self._usage
        sums = self.sums
        unpriced = next(iter(self.unpriced.values()), None)
        cost = None if unpriced is not None else round(max(sums.get("cost", 0.0), 0.0), 12)
        seconds = max(self.seconds, 0.0)
        # each figure a sum of amounts checked as they arrived: only a sum that overflowed
        # needs what Usage's validators make of it
        finite = math.isfinite(seconds) and (cost is None or math.isfinite(cost))
        self._usage = (Usage.trusted if finite else Usage)(
            steps=len(self.models) - len(self.replyless),
            tool_calls=len(self.counted),
            per_tool=dict(self.per_tool),
            tokens=int(sums.get("tokens", 0)),
            estimated_tokens=int(sums.get("estimated", 0)),
            cached_tokens=int(sums.get("cached", 0)),
            input_tokens=int(sums.get("input", 0)),
            output_tokens=int(sums.get("output", 0)),
            cost=cost,
            unpriced=unpriced,
            seconds=seconds,
        )
        return self._usage


def _not_lower(before: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Two records' figures about one call, each at its higher (an unknown cost stays
    unknown): what records anyone could write make of it."""
    body = dict(before, **{k: v for k, v in more.items() if k not in before})
    body["paid"] = bool(before.get("paid")) or bool(more.get("paid"))
    for name in _SUMMED:
        body[name] = max(_whole(before.get(name)), _whole(more.get(name)))
    body["seconds"] = max(
        _amount(before.get("seconds")) or 0.0, _amount(more.get("seconds")) or 0.0
    )
    cost, was = _amount(more.get("cost", before.get("cost"))), _amount(before.get("cost"))
    body["cost"] = None if cost is None or was is None else max(cost, was)
    return body


def identity(call: str, tool: str, args_hash: str) -> str:
    """What a call is, for counting it once: its id, tool and arguments."""
    return f"{call}\n{tool}\n{args_hash}"


def _whole(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _amount(value: Any) -> float | None:
    """A non-negative finite number, else None (a record that says no amount)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None
