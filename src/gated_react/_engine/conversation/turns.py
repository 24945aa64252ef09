"""Runs on a thread, like turns of a chat: a run answers the thread's last human message.

A run is named by that message's id, so nothing stored decides which run the thread is on: a
new message (or ``goal``) is a new run with fresh budgets, and a replay, a fork or a copy of
the thread that keeps the message is the same run, under the same budgets and records. A goal
becomes the human message here, under an id made of where the thread stands and the goal
(the same wherever the thread stands alike, so a fork before the run's first decision is the
same run).

A message that arrives while the thread's run is unfinished (paused on a question, say) ends
that run first: each call it left waiting is answered in the conversation (not run, or of
unknown outcome when it had been started), so every tool call id keeps exactly one result.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import Overwrite
from pydantic import ValidationError

from gated_react._engine.conversation.chat import not_run, result, said
from gated_react._engine.conversation.held import Held
from gated_react._engine.conversation.step_channel import read
from gated_react.state import RunInput, Step, dump
from gated_react.stops import StopReason

_GOAL_IDS = uuid.UUID("5b0e6f1c-3a51-4c6e-9d2e-6a7f0c1d2e3f")


@dataclass
class Opened:
    """What a decision starts from."""

    run: str
    """The run: the id of the human message it answers."""
    messages: list[BaseMessage]
    """The conversation as this decision sees it (a goal already its last message)."""
    at: int
    """Where the run's question is in ``messages``."""
    step: Step
    """The step in hand (a fresh one for a new run)."""
    new: bool
    """Whether this decision opens the run."""
    waiting: list[dict[str, Any]] = field(default_factory=list)
    """Calls a run this one cut short left unanswered (``tool_call`` dicts), to answer."""
    update: dict[str, Any] = field(default_factory=dict)
    """The writes that open the run (the goal's message, the cleared goal)."""


def goal_message_id(thread: str, position: int, goal: str, saved: bool) -> str:
    """The id of the human message a goal becomes: the same wherever a saved thread stands
    alike; a fresh one for a graph without a checkpointer, where every invocation is new."""
    if not saved:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_GOAL_IDS, f"{thread}:{position}:{goal}"))


def opening(
    messages: Sequence[BaseMessage],
    goal: Any,
    step: dict[str, Any] | None,
    *,
    thread: str,
    saved: bool,
    unfinished: bool = False,
) -> Opened:
    """The run this decision belongs to, and what opens it. ``unfinished``: the run of the
    step in hand has not ended (its record says so): the same goal sent again while it waits
    ends the waiting step, not the run (no new question, no fresh budgets)."""
    # The channel's own list unless a question is added to it (nothing here changes a list
    # in place): a copy per decision is a long run's conversation copied at every step.
    shown = messages if isinstance(messages, list) and goal is None else list(messages)
    update: dict[str, Any] = {}
    held = held_step(step)
    hint = question_of(held.run) if held is not None else None
    if goal is not None and unfinished and held is not None and _asks(shown, held, goal):
        RunInput.model_validate({"goal": goal})
        at = question_at(shown, hint)
        assert at is not None  # _asks found the question
        waiting = unanswered(shown)
        again = held.model_copy(update={"calls": [], "retry": None, "reply": None})
        update = {"goal": None, "step": dump(again)}
        return Opened(held.run, shown, at, again, new=False, waiting=waiting, update=update)
    if goal is not None:
        # LangGraph maps input keys to channels without the input schema's checks: apply them
        # here, so {"goal": ""} is the same clear ValidationError as a wrong type.
        RunInput.model_validate({"goal": goal})
        asked = HumanMessage(goal, id=goal_message_id(thread, len(shown), goal, saved))
        shown.append(asked)
        update = {"messages": [asked], "goal": None}
    at = question_at(shown, hint)
    if at is None:
        RunInput.model_validate({"messages": shown or None})  # raises: a run needs a goal
        raise AssertionError("unreachable: RunInput refuses a conversation without a question")
    question = str(shown[at].id)
    if held is not None and of_run(held.run, question, saved):
        return Opened(held.run, shown, at, held, new=False, update=update)
    run = question if saved else f"{question}#{uuid.uuid4().hex[:16]}"
    fresh = Step(run=run, traceparent=held.traceparent if held else None)
    update["step"] = dump(fresh)  # the decision writes its step over it: not kept
    return Opened(run, shown, at, fresh, new=True, waiting=unanswered(shown[:at]), update=update)


def _asks(messages: Sequence[BaseMessage], held: Step, goal: Any) -> bool:
    """Whether ``goal`` is the question the step in hand's run answers."""
    at = question_at(messages, question_of(held.run))
    if at is None or not isinstance(goal, str):
        return False
    question = messages[at]
    return str(question.id) == question_of(held.run) and question.text.strip() == goal.strip()


def hooks_edits(opened: Opened, rewritten: dict[str, tuple[Any, BaseMessage]]) -> list[BaseMessage]:
    """What the model hooks' edits write to the conversation: a stored message a hook rewrote
    (a redaction) with what it made of its content, as ``create_agent`` stores it, if the
    model was shown it as stored (not a question with earlier steps folded into it). A
    message a hook removed is only left out of what the model is shown this once: the
    thread keeps it (a removal could orphan a call's result, or shorten the thread so that a
    new question takes an earlier run's id)."""
    out: list[BaseMessage] = []
    for message in opened.messages if rewritten else ():
        found = rewritten.get(message.id or "")
        if found is not None and found[0] == message.content:
            out.append(message.model_copy(update={"content": found[1].content}))
    return out


def held_step(step: Any) -> Step | None:
    """The step in hand, if it is one (a damaged or edited one is dropped: a new one opens)."""
    try:
        return read(step) if step else None
    except ValidationError:
        return None


def question_of(run: str) -> str:
    """The id of the question a run answers: the run's name, less the nonce an unsaved run
    carries (``<question id>#<nonce>``)."""
    return run.partition("#")[0]


def of_run(run: str, question: str, saved: bool) -> bool:
    """Whether a step named ``run`` belongs to the run answering ``question``. A saved thread's
    run is its question's id: nothing stored names it, so no edit of the step buys a run (and
    its budgets) of its own. Without a checkpointer, each invocation is a run of its own."""
    if saved:
        return run == question
    return question_of(run) == question and "#" in run


def run_of(messages: Sequence[BaseMessage], run: str, saved: bool) -> bool:
    """Whether the step named ``run`` belongs to the run the conversation is on."""
    at = question_at(messages, question_of(run))
    return at is not None and of_run(run, str(messages[at].id), saved)


def question_at(messages: Sequence[BaseMessage], hint: str | None = None) -> int | None:
    """Where the thread's last human message is (a run's question), looked for from the end.
    ``hint``: the question the caller expects (its run's); where it was found in this
    conversation before, only the messages added since are looked through (a run's
    conversation grows between its steps: a 600-message run is not walked at every step)."""
    end, start = len(messages), 0
    held = _WHERE.get(hint) if hint else None
    kept = held[1] if held is not None else None
    if held is not None and kept is not None:
        at, seen = kept
        if seen <= end and messages[seen - 1] is held[0] and messages[at].id == hint:
            if seen == end:
                return at
            start = seen
    found = None
    for i in range(end - 1, start - 1, -1):
        if isinstance(messages[i], HumanMessage):
            found = i
            break
    if found is None and kept is not None and start:
        found = kept[0]
    if found is not None:
        _WHERE.put(str(messages[found].id), messages[end - 1], (found, end))
    return found


_WHERE: Held[str, tuple[int, int]] = Held()
"""Where each question was last found: its place and how many messages the conversation had,
held with that conversation's last message (the same object: the conversation it was found in
is a prefix of this one)."""


def unanswered(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The tool calls of the last AI message before the question that no result answers: an
    earlier run that never finished its step."""
    answered = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            return [dict(c) for c in message.tool_calls if c.get("id") not in answered]
    return []


def cut_short(
    messages: list[BaseMessage],
    at: int,
    waiting: list[dict[str, Any]],
    started: dict[str, str | None],
) -> tuple[Overwrite, int]:
    """The conversation with the calls an unfinished run left waiting answered where they
    belong (right after their AI message, before the new question), a note that the run ended
    there, and where the question now is. ``started``: the calls the record says ran (what they
    returned) or may have run (None)."""
    answers = settled(waiting, started)
    end = _after_calls(messages, at)
    names = ", ".join(dict.fromkeys(str(c.get("name")) for c in waiting))
    note = said(f"I did not finish: a new message came before {names} could be settled.")
    added = [*answers, note]
    return Overwrite([*messages[:end], *added, *messages[end:]]), at + len(added)


def settled(waiting: list[dict[str, Any]], started: dict[str, str | None]) -> list[ToolMessage]:
    """The answers of calls left waiting: what they returned, of unknown outcome, or not run."""
    return [_answer(call, started) for call in waiting]


def _after_calls(messages: list[BaseMessage], at: int) -> int:
    """Where the last AI message before ``at`` and its results end."""
    end = at
    while end > 0 and not isinstance(messages[end - 1], AIMessage | ToolMessage):
        end -= 1
    return end


def _answer(call: dict[str, Any], started: dict[str, str | None]) -> ToolMessage:
    name, call_id = str(call.get("name")), str(call.get("id"))
    done = started.get(call_id)
    if done is not None:  # it ran; its result was recorded, not yet shown
        return result(name, call_id, done, ok=True)
    if call_id in started:
        why = (
            f"outcome unknown ({StopReason.TOOL_OUTCOME_UNKNOWN}:{name}): {name} may have run, "
            "but the run ended before its result was recorded; a new message came instead. "
            "Find out whether it did before calling it again."
        )
        return result(name, call_id, why, ok=False)
    why = f"not run ({StopReason.TOOL_REJECTED}:{name}): a new message came instead"
    return not_run([call], why)[0]


def closing(text: str, message_id: str | None = None, reply: Any = None) -> dict[str, Any]:
    """The AI message that ends a run in the conversation: its answer, or why it stopped."""
    return {"messages": [said(text, message_id, reply)]}
