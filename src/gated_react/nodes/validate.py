"""validate: the action contract. One tool call (or up to ``max_parallel_calls``) or one final
answer; anything else is rejected: asked again with a reminder, or the run stops.

A reply's tool calls are in the conversation already (decide writes them as the model made
them): a rejected one is answered there with why, so every call keeps its one result."""

from __future__ import annotations

import json
from typing import Any, Optional, TypedDict

from langchain_core.runnables import RunnableConfig

from gated_react._engine.chat import not_run, proposal, with_ids
from gated_react._engine.contract import ActionError, check_answer, check_calls, check_contract
from gated_react._engine.deps import NodeDeps
from gated_react._engine.steps import ending, step_of
from gated_react.state import Answer, Call, FinalAction, Retry, Step, dump, tool_actions
from gated_react.stops import Stop, StopReason


class ValidateChannels(TypedDict, total=False):
    """The channels validate reads, as stored."""

    step: dict[str, Any] | None


def validate(
    state: ValidateChannels,
    config: Optional[RunnableConfig] = None,  # noqa: UP045 (the spelling LangGraph injects into)
    *,
    deps: NodeDeps,
) -> dict[str, Any]:
    """Parse the reply with the policy's protocol and apply the contract (to every call of a
    reply that holds several)."""
    step = step_of(state, "validate")
    reply = step.reply
    if reply is None:
        return rejected(step, ActionError("bad_json", "there is no model reply to validate"), deps)
    try:
        limit = deps.policy.max_parallel_calls
        candidate = deps.protocol.candidate(reply, deps.tools, limit)
        action = (
            check_calls(candidate) if isinstance(candidate, list) else check_contract(candidate)
        )
        schema = deps.policy.answer_schema
        if isinstance(action, FinalAction) and schema is not None:
            action = check_answer(action, schema)
    except ActionError as err:
        return rejected(step, err, deps)
    if isinstance(action, FinalAction):
        data = json.loads(action.answer) if deps.policy.answer_schema is not None else None
        answer = Answer(text=action.answer, data=data)
        return {"step": dump(step.model_copy(update={"answer": answer, "retry": None}))}
    named, _ = with_ids(tool_actions(action), reply)
    calls = [Call(id=str(a.id), tool=a.name, args=a.args) for a in named]
    return {"step": dump(step.model_copy(update={"calls": calls, "retry": None}))}


def rejected(step: Step, err: ActionError, deps: NodeDeps) -> dict[str, Any]:
    """Stop with ``invalid_action:<why>``, or ask again with a reminder while retries are left.

    An answer that misses ``answer_schema`` always gets at least one reminder: the model did
    answer, and the validation error tells it exactly what to fix."""
    policy = deps.policy
    streak = step.retry.count if step.retry else 0
    allowed = policy.max_invalid_retries if policy.on_invalid_action == "retry" else 0
    if err.why == "answer_schema":
        allowed = max(allowed, 1)
    if streak >= allowed:
        stop = Stop(StopReason.INVALID_ACTION, err.why, f"invalid action ({err.why}): {err}")
        return ending(step, stop)
    retry = Retry(why=err.why, message=str(err), count=streak + 1)
    update: dict[str, Any] = {"step": dump(step.model_copy(update={"retry": retry}))}
    written = proposal(deps, step.reply) if step.reply is not None else []
    if written:  # in the conversation: each call gets its one result, the rejection
        named, _ = with_ids(written, step.reply)  # type: ignore[arg-type]
        calls = [{"name": a.name, "id": a.id} for a in named]
        update["messages"] = not_run(calls, f"not run (invalid_action:{err.why}): {err}")
    return update
