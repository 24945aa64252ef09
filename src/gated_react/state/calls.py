"""The calls the gate let through and what came of them, and the two logs they leave: the
history the model sees again, the trace that audits every call."""

from typing import Any

from pydantic import Field

from gated_react.state.actions import ToolAction
from gated_react.state.base import StrictModel


class Outcome(StrictModel):
    """What came of an approved call."""

    ok: bool
    """True when the tool ran and returned."""
    observation: Any = None
    """The tool's result (JSON), or the error text the model is shown."""
    error: str | None = None
    """A stop-reason string when the call failed or was refused, e.g. ``tool_timeout:search``."""
    by_human: bool = False
    """True when a human answered in place of the tool (a ``respond`` decision): it did not run."""
    content: list[Any] | None = None
    """The content blocks the model is shown (text and an image, say), when the tool returned
    blocks; ``observation`` is then their text, what the history keeps."""
    artifact: Any = None
    """What the tool returned beside its content (``ToolMessage.artifact``) as plain JSON: the
    conversation keeps it, the model never sees it."""


class Call(StrictModel):
    """A call the gate let through, recorded before it runs so a crash cannot repeat it blindly."""

    step: int
    """The step that proposed it."""
    tool: str
    """The tool's name."""
    args: dict[str, Any]
    """The arguments it runs with (a human may have edited them)."""
    key: str
    """Idempotency key: stable for this thread, step, tool and arguments."""
    id: str | None = None
    """The tool call id in ``messages``: its ``ToolMessage`` answers it."""
    outcome: Outcome | None = None
    """Filled in by ``execute`` (or by the gate for a refusal the model is shown)."""

    @property
    def tool_call_id(self) -> str:
        """The id a tool is given (``ToolRuntime.tool_call_id``, ``InjectedToolCallId``, a
        ``wrap_tool_call`` request): the model's, which its ``ToolMessage`` answers, as
        ``create_agent`` gives it; a call recorded before calls had ids has only its key."""
        return self.id or self.key


class HistoryEntry(StrictModel):
    """One completed tool step, as the model will see it again."""

    step: int
    """The step number (1-based)."""
    action: ToolAction
    """The call that ran."""
    observation: Any
    """What it returned, cut to ``Policy.max_observation_chars``."""
    proposed: dict[str, Any] | None = Field(default=None, exclude_if=lambda value: value is None)
    """The arguments the model proposed, when a human edited them before the call ran
    (``action.args`` are the ones it ran with); the model is shown its own call and a note.
    Left out of the stored entry when None, so other entries are stored as before."""


class TraceEntry(StrictModel):
    """One tool call that reached the gate: the audit log."""

    step: int
    """The step number (1-based)."""
    tool: str
    """The tool's name."""
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
    """Set on the entry of a budget a human extended (``tool`` names the budget then), e.g.
    ``max_steps 8 -> 12 (approve)``."""
