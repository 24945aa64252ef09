"""Runs on a thread, like turns of a chat: a run's goal (given, or the last human message), fresh
budgets when the thread's previous run has ended, and the conversation so far.

``decide`` is every run's first node, so a run starts there: on a new thread, or when a new goal
or message arrives on a thread whose last run ended. The thread's logs (``history``, ``trace``)
are kept; this run's steps and loop keys start where the earlier runs' end.

A message (or goal) that arrives while the thread's run is unfinished, typically paused on a
question, ends that run first: the calls it was waiting on are traced as refused by the human
(``tool_rejected:<tool>``; ``tool_outcome_unknown:<tool>`` for a call that may have run before a
crash), the conversation gets the AI message that says so, and the new message starts a new run
with fresh budgets. ``CoreState.turn`` (the id of the human message a run answers) is how a new
message is told from the one the run started on.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import Overwrite

from gated_react._engine.call_keys import args_hash
from gated_react._engine.chat import not_run, result, said
from gated_react._engine.pending import gate_counted, step_record
from gated_react.state import (
    Call,
    Reply,
    RunContext,
    RunInput,
    State,
    ToolAction,
    TraceEntry,
    Usage,
    dump,
    last_human_text,
    tool_actions,
)
from gated_react.stops import Stop, StopReason, has_ended

_FRESH = ("status", "stop_reason", "message", "answer", "structured_response", "retry", "action")


class Opened(NamedTuple):
    """What a decision starts from."""

    state: State
    """The state it works from."""
    update: dict[str, Any]
    """What starts a run when this is the run's first decision (empty otherwise): the run's
    ``context`` recorded, a new run's fresh budgets, an unfinished run's end."""
    unchecked: bool
    """The run goes on after its waiting step was cut short, entering this decision from the
    graph's start: no node checked its budgets before it (observe and validate do)."""


def opening(state: State, context: RunContext) -> Opened:
    """The state this decision works from, and how this decision opens a run (``Opened``)."""
    cut, ended = cut_in(state), has_ended(state.status, state.stop_reason)
    if not ended and state.usage.steps and cut is None:
        if state.status is not None:  # an edit of status alone: the run goes on as it was
            return Opened(state.model_copy(update={"status": None}), {"status": None}, False)
        return Opened(state, {}, False)
    # LangGraph maps input keys to channels without the input schema's own checks: apply them
    # here, so {} or {"goal": ""} is the same clear ValidationError as a wrong type.
    RunInput.model_validate({"goal": state.goal or None, "messages": state.messages or None})
    changes: dict[str, Any] = {}
    update: dict[str, Any] = {}
    if ended or (cut is not None and cut.new):  # a new run: fresh budgets
        changes = {
            "usage": Usage(),
            "retry": None,
            "calls": [],
            "extensions": [],
            "history_from": len(state.history),
            "seen_from": len(state.seen),
            "spend_from": len(state.spend),
        }
        update = {
            "usage": dump(Usage()),
            **dict.fromkeys(_FRESH),
            "reply": None,
            "calls": [],
            "extensions": [],
            "history_from": changes["history_from"],
            "seen_from": changes["seen_from"],
            "spend_from": changes["spend_from"],
        }
    elif cut is not None:  # the waiting step ends; the run and its budgets go on
        changes = {"retry": None, "calls": [], "action": None, "status": None}
        update = {"retry": None, "calls": [], "action": None, "reply": None, "status": None}
    changes["run_context"], update["run_context"] = context, dump(context)
    if cut is not None:
        opened, update = _after_cut_in(state, cut.after, changes, update)
        return Opened(opened, update, not cut.new)
    text = last_human_text(state.messages)
    if text is not None:
        changes["goal"] = update["goal"] = text
        changes["turn"] = update["turn"] = state.messages[-1].id
    else:
        asked = HumanMessage(state.goal, id=goal_message_id(state))
        changes["messages"] = [*state.messages, asked]
        changes["turn"] = update["turn"] = asked.id
        update["messages"] = [asked]
    return Opened(state.model_copy(update=changes), update, False)


_GOAL_IDS = uuid.UUID("5b0e6f1c-3a51-4c6e-9d2e-6a7f0c1d2e3f")


def goal_message_id(state: State) -> str:
    """The id of the human message a goal becomes: the same wherever the thread stands alike
    (the messages and model replies before it, the goal), so a fork made before the run's
    first decision asks the same question, which the replay check knows it by."""
    where = f"{len(state.messages)}:{len(state.spend)}:{state.goal}"
    return str(uuid.uuid5(_GOAL_IDS, where))


class Cut(NamedTuple):
    """An unfinished run that this decision ends instead of continuing."""

    after: list[BaseMessage]
    """The messages that arrived after the human message the run answers (empty when only
    the goal changed, or the same goal came again while a step was waiting)."""
    new: bool
    """Whether something new came (a message, another goal), which starts a run with fresh
    budgets. The same goal again while a step waits only ends that step: the budgets go on,
    so a state that merely looks like a waiting step (an edit of ``history_from``, of
    ``action``) buys no budget."""


def cut_in(state: State) -> Cut | None:
    """How this decision cuts into an unfinished run; None when it continues the run."""
    if has_ended(state.status, state.stop_reason) or not state.usage.steps or state.turn is None:
        return None
    at = next((i for i, m in enumerate(state.messages) if m.id == state.turn), None)
    if at is None or not isinstance(state.messages[at], HumanMessage):
        return None  # not a question: an edit moved the turn; the run goes on as it was
    after: list[BaseMessage] = list(state.messages[own_end(state.messages, at) :])
    if any(
        isinstance(m, ToolMessage) or (isinstance(m, AIMessage) and m.tool_calls) for m in after
    ):
        return None  # a run's steps follow: the turn was edited back; the run goes on as it was
    new = bool(after) or state.goal != state.messages[at].text.strip()
    if new or waiting(state):
        return Cut(after, new)
    return None


def own_end(messages: Sequence[BaseMessage], turn_at: int) -> int:
    """Where the messages the run wrote after its turn's (its steps' calls and results) end:
    what follows arrived from outside."""
    end = turn_at + 1
    kinds = set(map(type, messages[end:]))  # a few types for however many messages
    if all(issubclass(kind, AIMessage | ToolMessage) for kind in kinds):
        return len(messages)
    while end < len(messages) and isinstance(messages[end], AIMessage | ToolMessage):
        end += 1
    return end


def waiting(state: State) -> bool:
    """True when the run's latest step never reached ``observe``: its calls wait on the gate
    (a question) or on ``execute`` (a question after a crash), or never ran."""
    if state.calls:
        return True
    shown = state.history[state.history_from :]
    unobserved = not shown or shown[-1].step != state.usage.steps
    return bool(tool_actions(state.action)) and state.retry is None and unobserved


def _after_cut_in(
    state: State, after: list[BaseMessage], changes: dict[str, Any], update: dict[str, Any]
) -> tuple[State, dict[str, Any]]:
    """End the unfinished run (its waiting calls traced, the conversation told) and start the
    new one on the message that cut in: the new messages, or the new goal as a human message."""
    said, entries, pending = interrupted(state)
    reason = (entries[0].stop_reason if entries else None) or ""
    answers = unanswered(pending, reason)
    note = AIMessage(said, id=str(uuid.uuid4()))
    turn_at = next(i for i, m in enumerate(state.messages) if m.id == state.turn)
    before = [*state.messages[: own_end(state.messages, turn_at)], *answers]
    if after:
        goal = last_human_text(after) or state.goal
        new = after
        # Overwrite, not RemoveMessage: a remove marker would stream to chat clients as a message.
        update["messages"] = Overwrite([*before, note, *new])
    else:
        goal = state.goal
        new = [HumanMessage(goal, id=goal_message_id(state))]
        update["messages"] = [*answers, note, *new]
    changes |= {"goal": goal, "turn": new[-1].id, "messages": [*before, note, *new]}
    update |= {"goal": goal, "turn": new[-1].id}
    if entries:
        update["trace"] = [dump(e) for e in entries]
    return state.model_copy(update=changes), update


def interrupted(state: State) -> tuple[str, list[TraceEntry], list[ToolAction | Call]]:
    """What the conversation is told of the unfinished run, and the trace entries of the calls
    it left waiting: not run, refused by the human whose new message came instead of an answer
    (or, for calls the gate had let through, of unknown outcome)."""
    left = [c for c in state.calls if c.outcome is None]
    calls: list[ToolAction | Call] = list(left)
    reason = StopReason.TOOL_OUTCOME_UNKNOWN
    if left and not gate_counted(state, left, step_record(state)):
        reason = StopReason.TOOL_REJECTED  # an edit wrote them; the gate never let them through
    elif not calls and waiting(state):
        calls = list(tool_actions(state.action))
        reason = StopReason.TOOL_REJECTED
    pending = [(c.tool, c.args) if isinstance(c, Call) else (c.name, c.args) for c in calls]
    if not pending:
        return "I did not finish: a new message came first.", [], []
    entries = [
        TraceEntry(
            step=state.usage.steps,
            tool=tool,
            args_hash=args_hash(args),
            ok=False,
            stop_reason=str(Stop(reason, tool)),
        )
        for tool, args in pending
    ]
    names = ", ".join(dict.fromkeys(tool for tool, _ in pending))
    if reason is StopReason.TOOL_REJECTED:
        why = f"{names} waited for approval and did not run: a new message came instead"
    else:
        why = f"{names} may have run, but {_UNRECORDED}; a new message came instead"
    return f"I stopped before finishing ({entries[0].stop_reason}): {why}.", entries, calls


_UNRECORDED = "the run ended before its result was recorded"


def unanswered(pending: list[ToolAction | Call], reason: str) -> list[ToolMessage]:
    """The results of the calls a run left waiting when a new message came: not run, for
    calls still before the gate; for calls it had let through (a stop pressed while one ran, a
    crash), never "not run": they may have run, and the model is told to check first."""
    if not reason.startswith(StopReason.TOOL_OUTCOME_UNKNOWN):
        return not_run(pending, f"not run ({reason}): a new message came instead")
    return [
        result(
            c.tool,
            c.id,
            f"outcome unknown ({Stop(StopReason.TOOL_OUTCOME_UNKNOWN, c.tool)}): {c.tool} may "
            f"have run, but {_UNRECORDED}; a new message came instead. Find out whether it "
            "did before calling it again.",
            ok=False,
        )
        for c in pending
        if isinstance(c, Call) and c.id is not None  # recorded before calls had ids: none
    ]


def closing(text: str, message_id: str | None = None, reply: Reply | None = None) -> dict[str, Any]:
    """The AI message that ends a run in the conversation: its answer (with what the ``reply``
    it came from says of itself: usage, finish reason, model), or why it stopped. Its id is
    set here (the model reply's, when the answer is that reply's text as it streamed), so the
    messages stream and the stored conversation name it alike."""
    return {"messages": [said(text, message_id, reply)]}
