"""Human approval: the question the gate asks through ``interrupt()`` and the answers it accepts.

The question carries LangChain's human-in-the-loop format (``HITLRequest``: ``action_requests``
and ``review_configs``) beside our own keys, so LangChain's UIs (Agent Chat UI, Agent Inbox)
show approve / edit / reject / respond buttons for it; the answer may be their
``{"decisions": [...]}`` or our ``{"approved": ..., "args": ..., "reason": ...}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gated_react._engine.execution.tool_runner import to_observation
from gated_react._engine.langgraph_internals import ask_human, earlier_interrupt_ids
from gated_react._engine.storable import plain
from gated_react.answers import UNUSABLE_ANSWER
from gated_react.policy import APPROVAL_DECISIONS
from gated_react.state.calls import canonical_json

ANSWERS = {
    "approve": {"approved": True},
    "approve_with_edits": {"approved": True, "args": {"...": "..."}},
    "reject": {"approved": False, "reason": "why"},
    "respond": {"decisions": [{"type": "respond", "message": "the answer, in place of the tool"}]},
}

_ANSWER_FOR = {
    "approve": "approve",
    "edit": "approve_with_edits",
    "reject": "reject",
    "respond": "respond",
}
"""The example answer of each of LangChain's decisions (``allowed_decisions``)."""


def offered(question: dict[str, Any]) -> dict[str, Any]:
    """The example answers of the decisions ``question`` allows (all, if it names none)."""
    configs = question.get("review_configs") or [{}]
    allowed = configs[0].get("allowed_decisions") or list(_ANSWER_FOR)
    return {_ANSWER_FOR[d]: ANSWERS[_ANSWER_FOR[d]] for d in _ANSWER_FOR if d in allowed}


@dataclass(frozen=True, slots=True)
class Decision:
    """A human's valid answer; ``response`` is set when the human answered in place of the
    tool (the tool does not run and the text is the observation)."""

    approved: bool
    args: dict[str, Any] | None = None
    reason: str = ""
    response: str | None = None
    tool: str | None = None
    """The tool an ``edit`` decision names (it must be the one asked about)."""


def answered_text(response: str, limit: int, secrets: tuple[str, ...]) -> str:
    """A human's answer in place of the tool, as the model reads it: cut at
    ``max_observation_chars`` (``limit``) with the visible marker, secrets masked."""
    shown = to_observation(response, limit, secrets)
    return shown if isinstance(shown, str) else str(shown)


def question(
    kind: str, tool: str, args: dict[str, Any], step: int, why: str, *, allowed: tuple[str, ...]
) -> dict[str, Any]:
    """A question in our keys and in LangChain's ``HITLRequest`` shape, for one call."""
    return {
        "kind": kind,
        "tool": tool,
        "args": args,
        "step": step,
        "why": why,
        "action_requests": [{"name": tool, "args": args, "description": why}],
        "review_configs": [{"action_name": tool, "allowed_decisions": list(allowed)}],
    }


def per_call(asked: dict[str, Any], call_id: str) -> dict[str, Any]:
    """``asked`` also as LangChain's per-call ``ToolApprovalRequest`` (``HumanInTheLoopMiddleware(
    interrupt_mode="per_call")``): its ``type``, ``tool_call_id``, ``name`` and ``description``."""
    extra = {"type": "tool_approval", "tool_call_id": call_id, "name": asked["tool"]}
    return {**asked, **extra, "description": asked["why"]}


_DECISION_KEYS = frozenset({"type", "message", "edited_action"})
"""The keys of LangChain's decisions: an answer with any other (``approved``) is not one."""


def parse_answer(value: Any) -> Decision:
    """A Decision from a resume value; raises ValueError naming what is wrong."""
    if isinstance(value, dict) and set(value) == {UNUSABLE_ANSWER}:
        raise ValueError(str(value[UNUSABLE_ANSWER]))
    if isinstance(value, dict) and "type" in value and set(value) <= _DECISION_KEYS:
        value = {"decisions": [value]}  # one of LangChain's decisions alone (``per_call``)
    if isinstance(value, dict) and "decisions" in value:
        return _from_decisions(value)
    if not isinstance(value, dict):
        raise ValueError(
            f"expected an object like {ANSWERS['approve']}, got {type(value).__name__}"
        )
    unknown = sorted(set(value) - {"approved", "args", "reason"})
    if unknown:
        raise ValueError(f"unknown keys {unknown[:5]}; allowed: approved, args, reason")
    approved = value.get("approved")
    if not isinstance(approved, bool):
        raise ValueError("'approved' must be true or false")
    args = value.get("args")
    if args is not None and (not approved or not isinstance(args, dict)):
        raise ValueError("'args' must be an object and goes only with approved=true")
    if args is not None:
        args = plain(args)  # Unstorable (a ValueError) names what no store could hold
    reason = value.get("reason", "")
    if not isinstance(reason, str):
        raise ValueError("'reason' must be a string")
    return Decision(approved=approved, args=args, reason=reason.strip())


def _from_decisions(value: dict[str, Any]) -> Decision:
    """LangChain's ``HITLResponse``: one decision for the one action request."""
    decisions = value.get("decisions")
    if set(value) != {"decisions"} or not isinstance(decisions, list) or len(decisions) != 1:
        raise ValueError("expected {'decisions': [one decision]} for the one action asked about")
    (decision,) = decisions
    kind = decision.get("type") if isinstance(decision, dict) else None
    if kind not in APPROVAL_DECISIONS:
        raise ValueError(f"a decision's 'type' must be one of {', '.join(APPROVAL_DECISIONS)}")
    message = decision.get("message", "")
    if not isinstance(message, str):
        raise ValueError("a decision's 'message' must be a string")
    if kind == "approve":
        return Decision(approved=True)
    if kind == "reject":
        return Decision(approved=False, reason=message.strip())
    if kind == "respond":
        if not message.strip():
            raise ValueError("a 'respond' decision needs a non-blank 'message'")
        return Decision(approved=False, response=plain(message.strip()))
    return _edited(decision.get("edited_action"))


def _edited(action: Any) -> Decision:
    if not isinstance(action, dict) or not isinstance(action.get("args"), dict):
        raise ValueError("an 'edit' decision needs 'edited_action': {'name', 'args': {...}}")
    name = action.get("name")
    return Decision(
        approved=True, args=plain(action["args"]), tool=None if name is None else str(name)
    )


def ask(
    question: dict[str, Any], check_args: Callable[[dict[str, Any]], str | None] | None = None
) -> Decision:
    """Pause the run until a human answers (the question's own ``answers`` examples, when it
    has them, replace the approval's); a malformed answer, a decision the question does not
    allow, an edit of another tool, or edited arguments that ``check_args`` refuses (it
    says why), asks again with the error."""
    error, asks = None, 0
    while True:
        # Asked again, a question keeps the ids it was asked under (LangGraph gives each ask a
        # new one): an app that kept the first id still answers it (runs.resume(question=)).
        earlier = earlier_interrupt_ids(asks)
        shown = {"answers": offered(question), **question, "error": error, "asked_as": earlier}
        value = ask_human(shown, same_question)
        asks += 1
        try:
            decision = parse_answer(value)
        except ValueError as exc:
            error = f"your last answer was not understood: {exc}"
            continue
        error = _refusal(question, decision, check_args)
        if error is None:
            return decision


_ASKED_AGAIN = ("answers", "error", "asked_as", "why", "description")
"""What may change when the same question is asked again: the examples, the error, the ids,
and the words about it (a review's ``description`` may say the time it asks)."""


def same_question(raised: Any, shown: dict[str, Any]) -> bool:
    """Whether a question this task raised is ``shown``: the same kind, tool, arguments, step
    and offer (an answer to it decides exactly this), whatever words describe it."""
    if not isinstance(raised, dict):
        return False
    kept = [_decided(q) for q in (raised, shown)]
    return canonical_json(kept[0]) == canonical_json(kept[1])


def _decided(asked: dict[str, Any]) -> dict[str, Any]:
    """What an answer to ``asked`` decides: it without its words."""
    kept = {k: v for k, v in asked.items() if k not in _ASKED_AGAIN}
    requests = kept.get("action_requests")
    if isinstance(requests, list):
        kept["action_requests"] = [
            {k: v for k, v in r.items() if k != "description"} if isinstance(r, dict) else r
            for r in requests
        ]
    return kept


def _refusal(
    question: dict[str, Any],
    decision: Decision,
    check_args: Callable[[dict[str, Any]], str | None] | None,
) -> str | None:
    """Why a well-formed decision cannot be taken for this question, or None."""
    allowed = question["review_configs"][0]["allowed_decisions"]
    kind = "respond" if decision.response is not None else None
    kind = kind or ("edit" if decision.args is not None else None)
    if kind is not None and kind not in allowed:
        return f"a {kind!r} decision is not allowed here; allowed: {', '.join(allowed)}"
    tool = question["tool"]
    if decision.tool is not None and decision.tool != tool:
        return (
            f"an edit cannot change the tool: the gate asked about {tool}, not "
            f"{decision.tool[:60]}; edit its arguments, or reject it"
        )
    why = None if decision.args is None or check_args is None else check_args(decision.args)
    return None if why is None else f"the edited arguments were refused: {why}"
