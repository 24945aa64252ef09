"""gate: the policy boundary. Budgets, allowlist, loop detection and human approval, in that order
(``_engine/authority/admit.py``), for every call the model proposed.

Nothing the model says reaches a tool without a permit from here, and the gate reads only the
proposed calls, this branch's calls so far and the run's record, never tool output: an
observation cannot talk it round. A reply with several calls (``Policy.max_parallel_calls``) is
checked whole before any call runs: each counts against the budgets as if the ones before it had
run, and if any one would stop the run, none runs. Its permits are written to the run's record
when the whole reply has passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt

from gated_react._engine.authority.admit import gatekeeper
from gated_react._engine.authority.known import asked_ids, started
from gated_react._engine.authority.ledger import Book, Place
from gated_react._engine.authority.records import Record
from gated_react._engine.conversation.step_channel import stored
from gated_react._engine.conversation.steps import ending, run_step
from gated_react._engine.deps import NodeDeps
from gated_react._engine.observability import gate_spans
from gated_react.state import Call, Step
from gated_react.stops import Stop


class GateChannels(TypedDict, total=False):
    """The channels the gate reads, as stored."""

    messages: list[Any]
    step: dict[str, Any] | None


def gate(state: GateChannels, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Let the proposed calls through (their permits recorded), settle them with what the
    model is shown instead, or stop the run."""
    place = Place.of(config)
    place.resumed(config)  # read the thread anew if it was deleted
    step = run_step(state, "gate", place.saved, config)
    book = place.ledger.book(place.thread, step.run)
    whole = place.whole(deps.policy.budget, tools=True)
    ran = started(step, place.ledger.about(asked_ids(step, deps)))
    asking: list[Record] = []
    try:
        update, records = gated(
            step, state.get("messages") or [], book=book, place=place, deps=deps, config=config,
            ran=ran, asking=asking, whole=whole,
        )  # fmt: skip
    except GraphInterrupt:  # paused on a question: that it was asked is recorded
        place.ledger.append(asking)
        raise
    place.ledger.append([*asking, *records])
    return update


async def agate(state: GateChannels, config: RunnableConfig, *, deps: NodeDeps) -> dict[str, Any]:
    """Async twin of ``gate``."""
    place = Place.of(config)
    await place.aresumed(config)  # read the thread anew if it was deleted
    step = run_step(state, "gate", place.saved, config)
    book = await place.ledger.abook(place.thread, step.run)
    whole = await place.awhole(deps.policy.budget, tools=True)
    ran = started(step, await place.ledger.aabout(asked_ids(step, deps)))
    asking: list[Record] = []
    try:
        update, records = gated(
            step, state.get("messages") or [], book=book, place=place, deps=deps, config=config,
            ran=ran, asking=asking, whole=whole,
        )  # fmt: skip
    except GraphInterrupt:
        await place.ledger.aappend(asking)
        raise
    await place.ledger.aappend([*asking, *records])
    return update


def gated(
    step: Step,
    messages: Sequence[BaseMessage],
    *,
    book: Book,
    place: Place,
    deps: NodeDeps,
    config: RunnableConfig,
    ran: frozenset[str] = frozenset(),
    asking: list[Record] | None = None,
    whole: Book | None = None,
) -> tuple[dict[str, Any], list[Record]]:
    """The gate's update and the records it leaves (none when the run stops here: a stop
    decided before any call runs leaves nothing let through). ``ran``: the calls under approval
    the run's record says started (this step replayed): not asked about again. ``asking``
    collects the records of the questions asked, even when the gate pauses on one; ``whole``
    is the thread's record, when a limit holds across its runs."""
    deps.spans.note(config, place, step.run)
    keeper = gatekeeper(
        step, messages, book=book, place=place, deps=deps, config=config, whole=whole
    )
    keeper.ran = ran
    if asking is not None:
        keeper.asking = asking
    calls = []
    for call in step.calls:
        with gate_spans.guardrail(deps.spans, config, call.tool) as span:
            checked = keeper.admit(call)
            gate_spans.decided(deps.spans, span, checked, deps.policy.require_approval)
        if isinstance(checked, Stop):
            extended = keeper.held.records(place.thread, step.run)
            return ending(step, checked, call.id, keeper.step), extended
        calls.append(checked)
    records = [*keeper.held.records(place.thread, step.run), *keeper.records]
    update: dict[str, Any] = {"step": stored(step.model_copy(update={"calls": calls}))}
    if keeper.reviewed and all(keeper.reviewed):
        update |= reviewed_message(messages, calls)
    return update, records


def reviewed_message(messages: Sequence[BaseMessage], calls: Sequence[Call]) -> dict[str, Any]:
    """The step's AI message written again once a human approved its calls, as
    ``create_agent``'s ``HumanInTheLoopMiddleware`` writes it after the answer, so a client
    streaming the state sees the reviewed step before its results. Under its own id it
    replaces itself: the conversation is unchanged, and keeps the model's own calls, as
    LangChain's does (an edit's arguments are in the call's result). It decides nothing:
    whether a call runs is its permit's business. Not written when a human rejected a call or
    answered in place of the tool: that answer, the next message, is what LangChain writes
    after the AI message there, and what such a client shows."""
    ids = {call.id for call in calls}
    for message in reversed(messages):
        if isinstance(message, AIMessage) and ids & {c["id"] for c in message.tool_calls}:
            return {"messages": [message]}
    return {}
