"""observe: the calls' outcomes join the history, the trace and the conversation (a
``ToolMessage`` per call); then the budgets are checked
before the next decision (this is the conditional edge's input), and a spent one may ask a
human for more (``Policy.on_budget``). A step whose every call is to a ``return_direct`` tool
that ran ends the run instead, its result the answer, as ``create_agent`` ends there."""

from __future__ import annotations

from typing import Any, Optional, TypedDict

from langchain_core.runnables import RunnableConfig

from gated_react._engine.budget_checks import Limits, enforce_before_step, held_to_spend
from gated_react._engine.call_keys import args_hash
from gated_react._engine.chat import edited, result
from gated_react._engine.deps import NodeDeps
from gated_react._engine.reads import read
from gated_react._engine.transcript import shown as shown_text
from gated_react.errors import MisroutedStep
from gated_react.state import (
    Call,
    CoreState,
    HistoryEntry,
    ToolAction,
    TraceEntry,
    dump,
    tool_actions,
)
from gated_react.stops import StopReason


class ObserveChannels(TypedDict, total=False):
    """The channels observe reads, as stored: the graph hands it these alone, and ``read``
    validates them into a ``CoreState`` that has no other field."""

    action: dict[str, Any] | None
    calls: list[dict[str, Any]]
    stop_reason: str | None
    usage: dict[str, Any]
    extensions: list[dict[str, Any]]
    spend: list[float | None]
    spend_from: int


def observe(
    state: CoreState | ObserveChannels,
    config: Optional[RunnableConfig] = None,  # noqa: UP045 (the spelling LangGraph injects into)
    *,
    deps: NodeDeps,
) -> dict[str, Any]:
    """Append the step's calls in the reply's order. The call that stopped the run is traced
    last and kept out of the history; calls of a stopped step that never ran are left out."""
    state = read(CoreState, state, ObserveChannels, config)
    calls = [call for call in state.calls if call.outcome is not None]
    if not calls and state.stop_reason:  # execute refused to run anything (a Send): just stop
        return {}
    if not calls or (len(calls) < len(state.calls) and not state.stop_reason):
        raise MisroutedStep("observe", "with calls that never ran and no stop")
    stopper = _stopper(calls) if state.stop_reason else None
    shown = [call for call in calls if call is not stopper]
    trace = [_entry(call) for call in shown]
    if stopper is not None:
        trace.append(_entry(stopper, stop_reason=state.stop_reason))
    proposed = _edits(state)
    update: dict[str, Any] = {
        "trace": [dump(e) for e in trace],
        "calls": [],
        # a call recorded before calls had ids (a run of an older version) is in no message
        "messages": [
            _answer(c, state.stop_reason, proposed.get(c.id))
            for c in state.calls
            if c.id is not None
        ],
    }
    if shown:
        update["history"] = [dump(_step(call, proposed.get(call.id))) for call in shown]
    if state.stop_reason:
        return update
    direct = _direct(deps, state)
    if direct is not None:  # the run ends here: no budget to check for a next step
        return {**update, **direct}
    held = Limits(deps.policy, state.extensions)
    usage = held_to_spend(state.usage, state.spend[state.spend_from :])
    over = enforce_before_step(held, usage, config)
    update = {**update, **held.update(), "trace": update["trace"] + held.entries()}
    return {**update, **over.update()} if over else update


def _edits(state: CoreState) -> dict[str | None, dict[str, Any]]:
    """The model's own arguments of each call a human edited before it ran (an approval's
    ``edit``), by call id: the step's AI message keeps them, the call ran with others."""
    asked = {action.id: action.args for action in tool_actions(state.action)}
    return {
        call.id: asked[call.id]
        for call in state.calls
        if call.id is not None and call.id in asked and asked[call.id] != call.args
    }


def _answer(call: Call, stop_reason: str | None, proposed: dict[str, Any] | None) -> Any:
    """The call's ``ToolMessage``: what the model was shown, or why it has no result."""
    outcome = call.outcome
    if outcome is None:
        return result(call.tool, call.id, f"not run: the run stopped ({stop_reason})", ok=False)
    # what the model is shown of it, so a later turn replays it as this run did
    if outcome.content is not None and proposed is None:  # an edit's note goes with the text
        return result(call.tool, call.id, outcome.content, ok=outcome.ok, artifact=outcome.artifact)
    if outcome.observation is not None:
        said = shown_text(outcome.observation)
    else:
        said = outcome.error or "failed"
    if proposed is not None:  # the AI message shows the model's call: say what ran instead
        said = edited(said, call.tool, call.args)
    return result(call.tool, call.id, said, ok=outcome.ok, artifact=outcome.artifact)


def _direct(deps: NodeDeps, state: CoreState) -> dict[str, Any] | None:
    """The successful end after a step whose calls are all to ``return_direct`` tools and
    all ran (a human's answer in place of one did not): the results are the answer, and the
    router sends the run to finish, not to the model."""
    calls = state.calls
    if not deps.direct or not calls:  # asked every step: most graphs have no such tool
        return None
    direct = all(c.tool in deps.direct for c in calls)
    ran = all(c.outcome is not None and c.outcome.ok and not c.outcome.by_human for c in calls)
    if not (calls and direct and ran):
        return None
    answer = "\n\n".join(shown_text(c.outcome.observation) for c in calls if c.outcome)
    names = ", ".join(dict.fromkeys(c.tool for c in calls))
    steps = f"{state.usage.steps} step{'s' if state.usage.steps != 1 else ''}"
    said = f"{names} returned directly (return_direct) after {steps}"
    return {"stop_reason": str(StopReason.SUCCESS), "message": said, "answer": answer}


def _stopper(calls: list[Call]) -> Call:
    """The call that stopped the run: the first that failed, in the reply's order."""
    return next((c for c in calls if c.outcome is not None and not c.outcome.ok), calls[-1])


def _entry(call: Call, stop_reason: str | None = None) -> TraceEntry:
    ok = call.outcome is not None and call.outcome.ok
    error = None if ok or stop_reason or call.outcome is None else call.outcome.error
    return TraceEntry(
        step=call.step,
        tool=call.tool,
        args_hash=args_hash(call.args),
        ok=ok,
        error=error,
        stop_reason=stop_reason,
        by_human=True if call.outcome is not None and call.outcome.by_human else None,
    )


def _step(call: Call, proposed: dict[str, Any] | None) -> HistoryEntry:
    observation = call.outcome.observation if call.outcome is not None else None
    return HistoryEntry(
        step=call.step,
        action=ToolAction(name=call.tool, args=call.args, id=call.id),
        observation=observation,
        proposed=proposed,
    )
