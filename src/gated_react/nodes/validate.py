"""validate: the action contract. One tool call (or up to ``max_parallel_calls``) or one final
answer; anything else is rejected: asked again with a reminder, or the run stops.

A reply's tool calls are in the conversation already (decide writes them as the model made
them): a rejected one is answered there with why, so every call keeps its one result."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from langchain_core.messages import AIMessage

from gated_react._engine.authority.ledger import Place
from gated_react._engine.conversation.chat import not_run, proposal, proposed, result, with_ids
from gated_react._engine.conversation.step_channel import stored
from gated_react._engine.conversation.steps import ending, step_of
from gated_react._engine.deps import NodeDeps
from gated_react._engine.model.contract import (
    ActionError,
    check_answer,
    check_calls,
    check_contract,
)
from gated_react.state import (
    Answer,
    Call,
    FinalAction,
    Retry,
    Step,
    ToolAction,
    tool_actions,
)
from gated_react.state.revived import data_of
from gated_react.stops import Stop, StopReason


class ValidateChannels(TypedDict, total=False):
    """The channels validate reads, as stored."""

    step: dict[str, Any] | None


def validate(state: ValidateChannels, *, deps: NodeDeps) -> dict[str, Any]:
    """Parse the reply with the policy's protocol and apply the contract (to every call of a
    reply that holds several)."""
    Place.reread()  # a pass resumed here: the gate reads the thread anew
    step = step_of(state, "validate")
    reply = step.reply
    if reply is None:
        return rejected(step, ActionError("bad_json", "there is no model reply to validate"), deps)
    if deps.structured is not None:
        answered = structured_answer(step, deps)
        if answered is not None:
            return answered
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
        return {"step": stored(step.model_copy(update={"answer": answer, "retry": None}))}
    named, _ = with_ids(tool_actions(action), reply)
    calls = [Call(id=str(a.id), tool=a.name, args=a.args) for a in named]
    # the reply is the conversation's now (decide wrote its calls): the nodes after read the
    # calls, and each would store the reply again
    return {"step": stored(step.model_copy(update={"calls": calls, "retry": None, "reply": None}))}


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
    update: dict[str, Any] = {"step": stored(step.model_copy(update={"retry": retry}))}
    written = proposal(deps, step.reply) if step.reply is not None else []
    if written:  # in the conversation: each call gets its one result, the rejection
        named, _ = with_ids(written, step.reply)  # type: ignore[arg-type]
        calls = [{"name": a.name, "id": a.id} for a in named]
        update["messages"] = not_run(calls, f"not run (invalid_action:{err.why}): {err}")
    return update


def structured_answer(step: Step, deps: NodeDeps) -> dict[str, Any] | None:
    """The final answer under a ``response_format`` (``_engine/compat/structured.py``): a call of an
    output tool, or the provider's JSON text; None for a reply that is neither (the contract
    then applies as to any other)."""
    structured, reply = deps.structured, step.reply
    assert structured is not None
    assert reply is not None
    outputs = [c for c in reply.tool_calls if c.get("name") in structured.outputs]
    if structured.kind == "tool" and not outputs:
        return None
    if structured.kind == "provider" and (reply.tool_calls or not reply.text.strip()):
        return None
    try:
        if outputs:
            answer = structured.from_calls(outputs, reply.text)
        else:
            answer = structured.from_text(reply.text, AIMessage(reply.text))
    except Exception as exc:
        return _unfit(step, deps, exc, outputs)
    data = data_of(answer)
    text = json.dumps(data, ensure_ascii=False) if outputs else reply.text
    call = dict(outputs[0]) if outputs else None
    said = structured.said(answer) if outputs else None
    answered = Answer(text=text, data=data, call=call, said=said)
    return {"step": stored(step.model_copy(update={"answer": answered, "retry": None}))}


def _unfit(
    step: Step, deps: NodeDeps, exc: Exception, outputs: list[dict[str, Any]]
) -> dict[str, Any]:
    """An answer that does not fit the schema: the model told why and asked again, as the
    strategy's ``handle_errors`` says (its calls answered with it), or the run stops."""
    assert deps.structured is not None
    assert step.reply is not None
    told = deps.structured.retry_with(exc)
    err = ActionError("answer_schema", f"the answer does not fit the schema: {exc}"[:500])
    if told is None:  # create_agent raises here (``handle_errors=False``, a provider's JSON)
        stop = Stop(StopReason.INVALID_ACTION, err.why, f"invalid action ({err.why}): {err}")
        return ending(step, stop)
    retry = Retry(why=err.why, message=told, count=(step.retry.count if step.retry else 0) + 1)
    if retry.count > max(deps.policy.max_invalid_retries, 1):
        return rejected(step, err, deps)
    named, message_id = with_ids(
        [ToolAction(name=str(c.get("name")), args=c.get("args") or {}) for c in outputs],
        step.reply,
    )
    ai = proposed(named, step.reply.text, message_id, step.reply)
    answers = [result(a.name, a.id, told, ok=False) for a in named]
    return {"step": stored(step.model_copy(update={"retry": retry})), "messages": [ai, *answers]}
