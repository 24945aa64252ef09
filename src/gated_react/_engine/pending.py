"""What ``execute`` may believe about calls the gate of this process did not just let through.

Such a step (an edit, a forged command, a replay, a resume in another process after a crash) is
checked again in full, as if the model had just proposed it. Two facts decide how: whether the
gate already counted these calls for the step the run is on (then they are taken out of the
counters once, to be counted again, so an honest step edited before ``execute`` is not its own
repeat), and whether they may have run already (only then is their outcome unknown).

Neither may be read from the ``calls`` channel alone, which any edit writes. A completed step's
call written back into ``calls`` would otherwise be taken for a step the gate had counted and
run again uncounted, past the budgets and the loop check, or asked about as a call that "may
already have run". So the step's own record decides: the calls must be the ones of the reply
the gate checked (``action``, by call id), none of them completed in this run's ``history`` at
the step the run is on, and the run not ending; one edited channel cannot make a completed step
look pending again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, TypeAdapter

from gated_react._engine.call_keys import loop_key
from gated_react._engine.langgraph_internals import channels_now
from gated_react.state import Action, Call, CoreState, HistoryEntry, Usage, tool_actions

RECORD = ("action", "history", "history_from", "stop_reason", "status")
"""The channels that say which step the run is on: read only when a step needs re-checking."""

_ACTION: TypeAdapter[Action | None] = TypeAdapter(Action | None)
_HISTORY: TypeAdapter[list[HistoryEntry]] = TypeAdapter(list[HistoryEntry])


@dataclass(frozen=True, slots=True)
class StepRecord:
    """The run's own record of its current step, beside the calls ``execute`` was handed."""

    action_ids: frozenset[str]
    """The call ids of the reply the gate checked."""
    completed_ids: frozenset[str]
    """The ids of this run's calls completed at the step the run is on."""
    ending: bool
    """The run has a stop reason or has ended: no step of it is pending."""

    def counted(self, calls: Sequence[Call]) -> bool:
        """Whether ``calls`` are the pending calls of the reply the gate checked."""
        ids = [call.id for call in calls]
        return (
            not self.ending
            and bool(ids)
            and all(i is not None and i in self.action_ids for i in ids)
            and not self.completed_ids.intersection(i for i in ids if i is not None)
        )


def step_record(state: CoreState, config: RunnableConfig | None = None) -> StepRecord:
    """The record of the step the run is on, from the channels as this task's superstep began
    (``config``'s), or from ``state``'s own fields (a node that reads them, a test's state)."""
    found = channels_now(config, RECORD) if config is not None else {}
    values = found or {k: _dumped(getattr(state, k, None)) for k in RECORD}
    action = _ACTION.validate_python(values.get("action"))
    history = _HISTORY.validate_python(values.get("history") or [])
    start = values.get("history_from") or 0
    start = start if isinstance(start, int) and 0 <= start <= len(history) else 0
    completed = {
        entry.action.id
        for entry in history[start:]
        if entry.step == state.usage.steps and entry.action.id is not None
    }
    return StepRecord(
        action_ids=frozenset(a.id for a in tool_actions(action) if a.id is not None),
        completed_ids=frozenset(completed),
        ending=bool(values.get("stop_reason") or values.get("status")),
    )


def _dumped(value: Any) -> Any:
    """A field as its channel stores it (plain JSON), for the record's validators."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_dumped(v) for v in value]
    return value


def gate_counted(state: CoreState, calls: Sequence[Call], record: StepRecord) -> bool:
    """Whether the gate counted ``calls`` for the step the run is on: they are that step's
    (``StepRecord.counted``) and the run's loop keys end with theirs."""
    keys = state.seen[state.seen_from :]
    own = [loop_key(call.tool, call.args) for call in calls]
    ends_with_own = len(own) <= len(keys) and keys[len(keys) - len(own) :] == own
    return ends_with_own and record.counted(calls)


def before_the_gate(
    state: CoreState, calls: Sequence[Call], record: StepRecord
) -> tuple[Usage, list[str], bool]:
    """The counters and loop keys to check ``calls`` against, and whether the gate had counted
    them. When it had (``gate_counted``), they are taken back, to be counted again once, so
    the calls are not their own repeats; an edit cannot lower a count this way: what is taken
    back is counted again. Any other calls are new proposals, checked against the whole
    record."""
    keys = state.seen[state.seen_from :]
    if not gate_counted(state, calls, record):
        return state.usage, keys, False
    own = [loop_key(call.tool, call.args) for call in calls]
    per_tool = dict(state.usage.per_tool)
    for call in calls:
        per_tool[call.tool] = max(per_tool.get(call.tool, 0) - 1, 0)
    calls_before = max(state.usage.tool_calls - len(calls), 0)
    usage = state.usage.model_copy(update={"tool_calls": calls_before, "per_tool": per_tool})
    return usage, keys[: len(keys) - len(own)], True
