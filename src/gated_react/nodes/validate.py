"""validate: the action contract. One tool call or one final answer; anything else is rejected.

Tool calls that pass go into the conversation here, as the AI message of the step (with the
text the model wrote with them): before the gate, so a call it pauses on is the last message."""

from __future__ import annotations

from typing import Any, Optional, TypedDict

from langchain_core.runnables import RunnableConfig

from gated_react._engine.budget_checks import Limits, enforce_before_step, held_to_spend
from gated_react._engine.chat import proposed, with_ids
from gated_react._engine.contract import ActionError, check_answer, check_calls, check_contract
from gated_react._engine.deps import NodeDeps
from gated_react._engine.reads import read
from gated_react._engine.streaming import stream_calls
from gated_react.state import CoreState, FinalAction, Retry, dump, tool_actions
from gated_react.stops import Stop, StopReason


class ValidateChannels(TypedDict, total=False):
    """The channels validate reads, as stored: the graph hands it these alone, and ``read``
    validates them into a ``CoreState`` that has no other field."""

    reply: dict[str, Any] | None
    retry: dict[str, Any] | None
    usage: dict[str, Any]
    extensions: list[dict[str, Any]]
    spend: list[float | None]
    spend_from: int


def validate(
    state: CoreState | ValidateChannels,
    config: Optional[RunnableConfig] = None,  # noqa: UP045 (the spelling LangGraph injects into)
    *,
    deps: NodeDeps,
) -> dict[str, Any]:
    """Parse the reply with the policy's protocol and apply the contract (to every call of a
    reply that holds several)."""
    state = read(CoreState, state, ValidateChannels, config)
    if state.reply is None:
        why = ActionError("bad_json", "there is no model reply to validate")
        return rejected(state, why, deps, config)
    try:
        limit = deps.policy.max_parallel_calls
        candidate = deps.protocol.candidate(state.reply, deps.tools, limit)
        action = (
            check_calls(candidate) if isinstance(candidate, list) else check_contract(candidate)
        )
        schema = deps.policy.answer_schema
        if isinstance(action, FinalAction) and schema is not None:
            action = check_answer(action, schema)
    except ActionError as err:
        return rejected(state, err, deps, config)
    # Each written channel is a row in the store: clear the retry note only when one is set.
    cleared = {"retry": None} if state.retry else {}
    calls = tool_actions(action)
    if not calls:
        return {"action": dump(action)} | cleared
    action, message_id = with_ids(action, state.reply)
    text = state.reply.text if deps.protocol.answer_is_text else ""
    message = proposed(tool_actions(action), text, message_id, state.reply)
    stream_calls(config, message)  # its text may have streamed: the calls follow it
    return {"action": dump(action), "messages": [message]} | cleared


def rejected(
    state: CoreState, err: ActionError, deps: NodeDeps, config: RunnableConfig | None = None
) -> dict[str, Any]:
    """Stop with ``invalid_action:<why>``, or ask again with a reminder while retries are left.

    An answer that misses ``answer_schema`` always gets at least one reminder: the model did
    answer, and the validation error tells it exactly what to fix."""
    policy = deps.policy
    streak = state.retry.count if state.retry else 0
    allowed = policy.max_invalid_retries if policy.on_invalid_action == "retry" else 0
    if err.why == "answer_schema":
        allowed = max(allowed, 1)
    if streak < allowed:
        held = Limits(policy, state.extensions)
        usage = held_to_spend(state.usage, state.spend[state.spend_from :])
        over = enforce_before_step(held, usage, config)
        extended = {**held.update(), "trace": held.entries()} if held.granted else {}
        if over is not None:
            return {**over.update(), "action": None, **extended}
        retry = Retry(why=err.why, message=str(err), count=streak + 1)
        return {"retry": dump(retry), "action": None, **extended}
    stop = Stop(StopReason.INVALID_ACTION, err.why, message=f"invalid action ({err.why}): {err}")
    return {**stop.update(), "action": None}
