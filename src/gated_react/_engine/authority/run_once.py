"""A step's calls from permit to result: what ``execute`` runs, and what it answers without
running. Each call must hold a valid permit (or earn one, through the gate's checks again); a
call that is not idempotent must also be claimed in the record (``started``) before it runs,
once per key. Every call is closed (``done``) when it returns. Found ``done`` (a crash after
it returned, a replay, a fork, a copy, an answer sent twice), a call is answered with what it
returned then, and nothing runs or is counted again; found ``started`` without ``done`` (any
of those while it ran), the outcome of a call that is not idempotent is unknown: a human is
asked where the policy puts the tool under approval, else the run stops
``tool_outcome_unknown:<tool>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from gated_react._engine.authority.admit import Gatekeeper, gatekeeper
from gated_react._engine.authority.known import branch_calls, key_for
from gated_react._engine.authority.ledger import Book, Place
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.authority.started import unknown
from gated_react._engine.conversation.chat import edited, result
from gated_react._engine.conversation.step_channel import stored
from gated_react._engine.conversation.steps import ending
from gated_react._engine.execution import tool_results, tool_runner
from gated_react._engine.execution.call_keys import args_hash, loop_key
from gated_react._engine.execution.shares import Shares
from gated_react._engine.storable import error_text
from gated_react.state import Call, Outcome, Step
from gated_react.state.calls import canonical_json
from gated_react.stops import Stop, StopReason

if TYPE_CHECKING:  # the parts' type only: deps is built from the modules that use it
    from gated_react._engine.deps import NodeDeps

_ALWAYS_STOP = (StopReason.TOOL_DENIED, StopReason.MAX_SECONDS)
_SHOWN_CHARS = 20_000
"""The most of a result a ``done`` record keeps, to answer the same call found done again."""


@dataclass
class Plan:
    """One execute of a step: each call's way (shown, answered from the record, run), the
    records it leaves, and how the step ends."""

    step: Step
    place: Place
    deps: NodeDeps
    gatekeeper: Callable[[], Gatekeeper]
    """The gate's checks for the run, made when a call needs them (one without a valid
    permit, a question, a stop): a call the gate let through is only looked up."""
    book: Book
    calls: list[Call]
    answers: dict[int, ToolMessage] = field(default_factory=dict)
    """The calls answered without running, by place."""
    records: list[Record] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    once: list[int] = field(default_factory=list)
    """Of ``runs``, the calls to claim first (not idempotent, not run again by a human)."""
    about: dict[str, list[Record]] = field(default_factory=dict)
    again: set[int] = field(default_factory=set)
    """Calls a human said to run again though they may have run: not claimed, just run."""
    refused: list[Record] = field(default_factory=list)
    """The ``done`` records of calls whose arguments their tool's schema refused (under
    ``on_tool_error="observe"``: answered with why, never run), so the trace says they failed."""
    stop: tuple[Stop, str] | None = None
    attempts: dict[int, str] = field(default_factory=dict)
    """Each call's run in this process, by place (``waiting.Running.attempt``): its ``done``
    record settles the seconds its ``running`` records counted, not an earlier run's."""
    shares: Shares = field(default_factory=Shares)
    """The run's time left, shared by the calls that run: one still running when it is
    spent is cut off."""
    _keeper: Gatekeeper | None = None

    def asking(self) -> list[Record]:
        """The ``asked`` records of the checks run so far: written even when they pause."""
        return [] if self._keeper is None else list(self._keeper.asking)

    @property
    def keeper(self) -> Gatekeeper:
        if self._keeper is None:
            self._keeper = self.gatekeeper()
        return self._keeper

    @classmethod
    def of(
        cls,
        step: Step,
        messages: Sequence[BaseMessage],
        *,
        book: Book,
        place: Place,
        deps: NodeDeps,
        config: RunnableConfig,
        whole: Book | None = None,
    ) -> Plan:
        """The calls with the keys the gate gives them on this branch (whatever the state says)."""
        keeper = partial(
            gatekeeper, step, messages, book=book, place=place, deps=deps, config=config,
            whole=whole,
        )  # fmt: skip
        seen, calls = branch_calls(messages, step.run), []
        for call in step.calls:
            text = canonical_json(call.args)
            key = key_for(deps, place.thread, step.run, call, seen, text=text)
            calls.append(call.model_copy(update={"key": key}))
            seen.add(loop_key(call.tool, call.args, text))
        return cls(step, place, deps, keeper, book, calls)

    def once_keys(self) -> list[str]:
        """The keys and ids of the calls to run: what the record is asked about (by id too: a
        copied thread keeps its calls' ids, not its keys)."""
        asked = [c for c in self.calls if c.shown is None]
        return [*(c.key for c in asked), *(c.id for c in asked)]

    def found(self, records: Sequence[Record]) -> None:
        """What the record says of the calls, by key, and by call id in this run (in any
        thread: a copy of the thread is the same run)."""
        for record in records:
            self.about.setdefault(record.key, []).append(record)
            call = record.body.get("call")
            if isinstance(call, str) and call != record.key and record.run == self.step.run:
                self.about.setdefault(call, []).append(record)

    def claims(self) -> list[Record]:
        run = self.step.run
        calls = [self.calls[i] for i in self.once]
        return [
            self.place.record(
                run, Kind.STARTED, c.key, call=c.id, tool=c.tool, args_hash=args_hash(c.args)
            )
            for c in calls
        ]

    def claimed(self, won: list[bool]) -> None:
        """A call another process claimed between the check and the claim: outcome unknown."""
        for index, ok in zip(list(self.once), won, strict=True):
            if not ok and self.stop is None:
                self.runs.remove(index)
                self.stop = (unknown(self.deps, self.calls[index]), self.calls[index].id)

    def to_run(self) -> list[int]:
        return [] if self.stop is not None else list(self.runs)

    def completed(self, ran: Sequence[tuple[int, Any, Exception | None, float]]) -> dict[str, Any]:
        """The step's results in the conversation (one per call, in the reply's order), the
        ``done`` records, and how the step ends: on a failure, as ``on_tool_error`` says; on a
        call a tool hook tried to change, always."""
        self.records = []
        failures: list[tuple[Stop, str]] = []
        for index, value, error, seconds in sorted(ran, key=lambda item: item[0]):
            message, why = self._result(self.calls[index], value, error, (seconds, index))
            self.answers[index] = message
            if why is not None:
                failures.append((why, self.calls[index].id))
        policy = self.deps.policy
        if policy.on_tool_error == "observe":  # not a call a hook changed, nor one cut off
            failures = [f for f in failures if f[0].reason in _ALWAYS_STOP]
        if policy.on_budget == "ask":  # the next decision asks for more time
            failures = [f for f in failures if f[0].reason is not StopReason.MAX_SECONDS]
        stop = self.stop or (failures[0] if failures else None)
        messages = [self.answers[i] for i in sorted(self.answers)]
        step = self.step.model_copy(update={"calls": self.calls})
        update: dict[str, Any] = {"messages": messages, "step": stored(step)}
        if stop is None:
            return update
        return update | ending(step, stop[0], stop[1], self.keeper.step)

    def done(
        self, call: Call, text: str, *, ok: bool, why: Stop | None, seconds: float,
        attempt: str = "",
    ) -> Record:  # fmt: skip
        """The record that closes ``call``: how it went and what the model was shown."""
        return self.place.record(
            self.step.run, Kind.DONE, call.key, call=call.id, tool=call.tool,
            args_hash=args_hash(call.args), ok=ok, error=None if why is None else str(why),
            seconds=seconds, shown=text[:_SHOWN_CHARS], **({"attempt": attempt} if attempt else {}),
        )  # fmt: skip

    def _result(
        self, call: Call, value: Any, error: Exception | None, timed: tuple[float, int]
    ) -> tuple[ToolMessage, Stop | None]:
        deps, why = self.deps, None
        if error is None and not tool_results.failed(value):
            shown = tool_results.outcome(value, deps.policy.max_observation_chars, deps.secrets)
            content, artifact, ok = shown.content, shown.artifact, True
        elif error is None:
            # an error handled where the app handles errors (the tool's handle_tool_error, a
            # tool hook): a result with status "error", shown to the model as create_agent
            # shows it; on_tool_error is for the failures nobody handled
            shown = tool_results.outcome(value, deps.policy.max_observation_chars, deps.secrets)
            content, artifact, ok = shown.content, shown.artifact, False
        else:
            why = _failure(deps, call, error)
            content, artifact, ok = why.message, None, False
        text = content if isinstance(content, str) else tool_results.record(content)
        seconds, attempt = timed[0], self.attempts.get(timed[1], "")
        self.records.append(self.done(call, text, ok=ok, why=why, seconds=seconds, attempt=attempt))
        # the text is the answer only of a return_direct tool; for any other it is in the
        # conversation already, and the step would store it again at every node
        direct = ok and call.tool in deps.direct
        outcome = Outcome(ok=ok, text=text[:_SHOWN_CHARS] if direct else "")
        self.calls[self.calls.index(call)] = call.model_copy(update={"outcome": outcome})
        answer = result(call.tool, call.id, content, ok=ok, artifact=artifact)
        return as_edited(call, answer, text, deps), why


def as_edited(call: Call, answer: ToolMessage, text: str, deps: NodeDeps) -> ToolMessage:
    """The result of a call a human edited says what ran (the message shows the model's
    call), in the words of the middleware that reviewed it, if one did; any other as it is."""
    if call.proposed is None:
        return answer
    review = deps.reviews.get(call.tool)
    note = None if review is None else review.edit_prefix(call.tool, call.args, bool(text))
    return edited(answer, text, call.args, note)


def not_let_through(stop: Stop) -> Stop:
    """``stop`` for a call the state held that the gate had not let through."""
    said = f"{stop.message}; the state held this call, but the gate did not let it through"
    return Stop(stop.reason, stop.detail, said)


def _failure(deps: NodeDeps, call: Call, error: Exception) -> Stop:
    if isinstance(error, tool_runner.TimeSpent):
        limit = deps.policy.budget.max_seconds  # extended only where it asks, and never ends
        return Stop(StopReason.MAX_SECONDS, message=f"max_seconds {limit:g} reached: {error}")
    if isinstance(error, tool_runner.ToolTimeout):
        return Stop(StopReason.TOOL_TIMEOUT, call.tool, str(error))
    if isinstance(error, tool_runner.RunAgain):
        return Stop(StopReason.TOOL_DENIED, call.tool, f"{call.tool} ran once, not twice: {error}")
    if isinstance(error, tool_runner.CallChanged):
        return Stop(StopReason.TOOL_DENIED, call.tool, f"{call.tool} did not run: {error}")
    text = f"{type(error).__name__}: {error_text(error, *deps.secrets)}"[:500]
    return Stop(StopReason.TOOL_ERROR, call.tool, f"{call.tool} failed: {text}")
