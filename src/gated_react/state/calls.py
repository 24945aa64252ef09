"""A call on its way through the gate, and the two views of calls a run derives from its
record and conversation: the history the model saw (``HistoryEntry``) and the trace that audits
every call that reached the gate (``TraceEntry``)."""

import json
from typing import Any, cast

from pydantic import Field

from gated_react.jsontext import json_encoder
from gated_react.state.actions import ToolAction
from gated_react.state.base import StrictModel


def canonical_json(value: Any) -> str:
    """JSON with keys sorted at every depth and no extra whitespace: how a permit names a
    call's arguments (non-JSON values become strings)."""
    return _CANONICAL(value)


_CANONICAL = json_encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


class Shown(StrictModel):
    """What the model is shown in place of a call's result: the gate refused it, reminded the
    model of a repeat, or a human answered in place of the tool. The call does not run."""

    text: str
    """The words the model reads."""
    error: str | None = None
    """The stop-reason string of a refusal (``tool_denied:pay``), None for a human's answer."""
    by_human: bool = False
    """True when a human answered in place of the tool (a ``respond`` decision)."""


class Outcome(StrictModel):
    """How a call that ran went: what observe needs to route the run."""

    ok: bool
    """True when the tool ran and returned (and said nothing of an error)."""
    text: str = ""
    """What the model was shown, for a ``return_direct`` tool (the run's answer); empty for
    any other (the conversation holds it)."""


class Call(StrictModel):
    """One call of a step, as it passes validate, the gate and execute. This is a proposal and
    its progress, never an authority: whether it runs is the gate's permit in the run's record."""

    id: str
    """The tool call's id in ``messages``; its ``ToolMessage`` answers it."""
    tool: str
    """The tool's name."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The arguments it runs with (the model's, or a human's edit of them)."""
    key: str = ""
    """The call's key: the same for the same call of the same run wherever it is replayed
    (a fork, a copy, an answer sent twice); the tool's idempotency key. Set by the gate."""
    proposed: dict[str, Any] | None = None
    """The model's own arguments, when a human edited them before the call ran."""
    shown: Shown | None = None
    """What the model is shown instead of a result: the call does not run."""
    outcome: Outcome | None = None
    """Set by execute once the call ran."""

    def frozen(self) -> dict[str, Any]:
        """A fresh deep copy of the arguments, as the permit names them: what a tool (and a
        tool hook) is given, so nothing it does to them changes the call that was checked."""
        return cast(dict[str, Any], json.loads(canonical_json(self.args)))


class HistoryEntry(StrictModel):
    """One completed tool call, as the conversation holds it."""

    step: int
    """The step number in its run (1-based)."""
    action: ToolAction
    """The call as it ran: the model's, with the arguments a human edited it to, if one did
    (the conversation's AI message keeps the model's own)."""
    observation: Any
    """What the model was shown of its result (without the note on a call a human edited)."""
    ok: bool = True
    """False when the call failed or was refused."""
    message_id: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """The id of the ``ToolMessage`` that holds the result (what a hook that rewrites what
    the model is shown names it by)."""


class TraceEntry(StrictModel):
    """One call that reached the gate, or a budget a human extended: the audit log, read from
    the run's record."""

    step: int
    """The step number (1-based)."""
    tool: str
    """The tool's name (the budget's, for an extension)."""
    args_hash: str
    """Short stable hash of the arguments' canonical JSON."""
    ok: bool
    """True when the call ran and returned."""
    error: str | None = None
    """Why a call that did not stop the run failed (``Policy.on_tool_error="observe"``)."""
    stop_reason: str | None = None
    """Set on the entry of the call that ended the run."""
    by_human: bool | None = None
    """True when a human answered in place of the tool (``respond``): the tool did not run."""
    extended: str | None = None
    """Set on the entry of a budget a human extended, e.g. ``max_steps 8 -> 12 (approve)``."""
