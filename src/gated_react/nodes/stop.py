"""stop: the one exit for every end that is not an answer. The node that decided the stop named
it in the step; here it is written: the run's end, each call of the last step that has no
result answered as not run, and a closing message that says, as the agent would, why it
stopped."""

from __future__ import annotations

from typing import Any, Optional, TypedDict

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig

from gated_react._engine.authority.ledger import Place
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.conversation.chat import not_run
from gated_react._engine.conversation.steps import step_of
from gated_react._engine.conversation.turns import closing, unanswered
from gated_react._engine.execution.call_keys import args_hash
from gated_react.errors import MisroutedStep
from gated_react.state import Ending, Step
from gated_react.stops import StopReason, said


class StopChannels(TypedDict, total=False):
    """The channels stop reads, as stored."""

    messages: list[Any]
    step: dict[str, Any] | None


def stop(
    state: StopChannels,
    config: Optional[RunnableConfig] = None,  # noqa: UP045 (the spelling LangGraph injects into)
) -> dict[str, Any]:
    """Write the stopped end (and tell the conversation why)."""
    step = step_of(state, "stop")
    update = stopped(state, step)
    if config is not None:
        place = Place.of(config)
        place.ledger.append([_ended(place, step)])
    return update


async def astop(state: StopChannels, config: RunnableConfig) -> dict[str, Any]:
    """Async twin of ``stop``."""
    step = step_of(state, "stop")
    update = stopped(state, step)
    place = Place.of(config)
    await place.ledger.aappend([_ended(place, step)])
    return update


def stopped(state: StopChannels, step: Step) -> dict[str, Any]:
    ending = step.ending
    if ending is None:
        raise MisroutedStep("stop", "with no stop reason recorded")
    waiting = unanswered(state.get("messages") or [])
    answers = [_answer(call, ending) for call in waiting]
    end = closing(said(ending.reason, ending.message))
    return {
        "status": "stopped",
        "stop_reason": ending.reason,
        "message": ending.message,
        "structured_response": None,
        "messages": [*answers, *end["messages"]],
    }


def _answer(call: dict[str, Any], ending: Ending) -> ToolMessage:
    """A waiting call's answer: not run, but for the call whose outcome the stop says is
    unknown (it may have run: "not run" would invite a second payment). Neither is a result
    (no view of the run's calls takes it for one)."""
    if call.get("id") == ending.call and ending.reason.startswith(_UNKNOWN):
        return not_run([call], f"outcome unknown ({ending.reason}): {ending.message}")[0]
    return not_run([call], f"not run: the run stopped ({ending.reason}): {ending.message}")[0]


_UNKNOWN = f"{StopReason.TOOL_OUTCOME_UNKNOWN}:"


def _ended(place: Place, step: Step) -> Record:
    ending = step.ending
    assert ending is not None  # stopped() checked it
    body: dict[str, Any] = {"reason": ending.reason, "message": ending.message}
    stopper = next((c for c in step.calls if c.id == ending.call), None)
    if stopper is not None:
        body |= {"call": stopper.id, "tool": stopper.tool, "args_hash": args_hash(stopper.args)}
    if ending.step is not None:
        body["step"] = ending.step
    return place.record(step.run, Kind.ENDED, step.run, **body)
