"""finish: the run ends with its answer: the model's final answer (as the conversation's last
AI message, under the reply's id, so what streamed and what is stored are one message), or a
``return_direct`` tool's result (the conversation then ends with its ``ToolMessage``, as under
``create_agent``)."""

from __future__ import annotations

from typing import Any, Optional, TypedDict

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from gated_react._engine.authority.ledger import Place
from gated_react._engine.authority.records import Kind
from gated_react._engine.conversation.chat import proposed, result
from gated_react._engine.conversation.steps import step_of
from gated_react._engine.conversation.turns import closing
from gated_react.errors import MisroutedStep
from gated_react.state import Answer, Reply, Step, ToolAction
from gated_react.stops import StopReason


class FinishChannels(TypedDict, total=False):
    """The channels finish reads, as stored."""

    step: dict[str, Any] | None


def finish(
    state: FinishChannels,
    config: Optional[RunnableConfig] = None,  # noqa: UP045 (the spelling LangGraph injects into)
) -> dict[str, Any]:
    """Write the successful end: status ``ok``, stop reason ``success``, the answer."""
    step = step_of(state, "finish")
    if config is None:  # a node called by hand
        return finished(step, 0)
    place = Place.of(config)
    place.resumed(config)  # read the thread anew if it was deleted
    update = finished(step, place.ledger.book(place.thread, step.run).tally.usage().steps)
    place.ledger.append([_ended(place, step, update)])
    return update


async def afinish(state: FinishChannels, config: RunnableConfig) -> dict[str, Any]:
    """Async twin of ``finish``."""
    step = step_of(state, "finish")
    place = Place.of(config)
    await place.aresumed(config)  # read the thread anew if it was deleted
    book = await place.ledger.abook(place.thread, step.run)
    update = finished(step, book.tally.usage().steps)
    await place.ledger.aappend([_ended(place, step, update)])
    return update


def _ended(place: Place, step: Step, update: dict[str, Any]) -> Any:
    return place.record(step.run, Kind.ENDED, step.run, reason=update["stop_reason"],
                        message=update["message"])  # fmt: skip


def finished(step: Step, steps: int) -> dict[str, Any]:
    """The end's writes, after ``steps`` model decisions."""
    answer = step.answer
    if answer is None:
        raise MisroutedStep("finish", "without a final answer")
    update: dict[str, Any] = {
        "status": "ok",
        "stop_reason": str(StopReason.SUCCESS),
        "structured_response": answer.data,
    }
    if answer.direct:
        names = ", ".join(dict.fromkeys(c.tool for c in step.calls))
        said = f"{names} returned directly (return_direct) after {_steps(steps)}"
        return update | {"message": said}
    reply = step.reply
    if answer.call is not None and reply is not None:  # an output tool's call: create_agent's way
        update["message"] = f"final answer after {_steps(steps)}"
        return update | {"messages": _output_call(answer, reply)}
    streamed = reply is not None and not reply.tool_calls and reply.text.strip() == answer.text
    text = reply.text if streamed and reply is not None else answer.text
    update["message"] = f"final answer after {_steps(steps)}"
    return update | closing(text, reply.id if streamed and reply else None, reply)


def _steps(count: int) -> str:
    return f"{count} step{'s' if count != 1 else ''}"


def _output_call(answer: Answer, reply: Reply) -> list[BaseMessage]:
    """The model's call of the output tool and its result, as ``create_agent`` stores them."""
    call = answer.call or {}
    name, call_id = str(call.get("name")), str(call.get("id"))
    action = ToolAction(name=name, args=call.get("args") or {}, id=call_id)
    ai = proposed([action], reply.text, reply.id or call_id, reply)
    return [ai, result(name, call_id, answer.said or "", ok=True)]
