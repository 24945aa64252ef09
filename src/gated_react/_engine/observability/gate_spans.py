"""The ``apply_guardrail`` span of every check the gate makes: the verdict on one proposed call
(allowed, answered by a human, refused, reminded, asked a human, stopped) and the policy rule
that decided it, also as the conventions' ``gen_ai.guardrail.result`` event. The gate is a
dedicated policy layer, the kind of component the conventions' guardrail spans describe."""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind

from gated_react._engine.observability.agent_spans import (
    OP,
    PROVIDER,
    TOOL,
    TRACER,
    AgentSpans,
    api_alone,
    parent,
)
from gated_react._engine.observability.span_content import quiet
from gated_react.state import Call
from gated_react.stops import Stop, StopReason, parse_stop_reason

RESULT, RULE = "gen_ai.guardrail.result.value", "gen_ai.guardrail.policy.rule.id"
GATE = "gated-react gate"
"""The guardrail component: the policy layer every proposed call goes through."""


@contextmanager
def guardrail(spans: AgentSpans, config: RunnableConfig, tool_name: str) -> Iterator[Span]:
    """The ``apply_guardrail`` span of the gate's check of one proposed call; a check that
    pauses to ask a human ends it as ``asked_human``."""
    if api_alone():
        yield INVALID_SPAN
        return
    attributes = {OP: "apply_guardrail", "gen_ai.guardrail.component.name": GATE, TOOL: tool_name}
    # The gate is the provider here, not the model's; OpenInference's kind lets Phoenix (and
    # the backends that read it) show the verdicts as guardrails rather than unknown spans.
    attributes |= {PROVIDER: GATE, "gen_ai.guardrail.source": "tool_input"}
    attributes["openinference.span.kind"] = "GUARDRAIL"
    if spans.labels.policy_hash is not None:
        attributes["gen_ai.guardrail.policy.id"] = spans.labels.policy_hash
    span = TRACER.start_span(
        "apply_guardrail gate", parent(spans, config), SpanKind.INTERNAL, attributes=attributes
    )
    try:
        yield span
    except GraphInterrupt as asked:
        _verdict(span, "asked_human", _asked_rule(asked))
        raise
    finally:
        span.end()


@quiet
def decided(
    spans: AgentSpans, span: Span, checked: Call | Stop, require_approval: AbstractSet[str]
) -> None:
    """The gate's verdict on one call: allowed, answered (by a human, in place of the tool),
    refused or reminded (shown to the model), or stopped (the run ends), with the rule. With
    content capture off, a reason that quotes the call (its arguments checked, a human's
    words) is left at the stop reason."""
    if not span.is_recording():
        return
    content = spans.labels.content
    if isinstance(checked, Stop):
        reason = checked.message
        if checked.reason is StopReason.TOOL_REJECTED and not content:
            reason = "a human rejected the call"  # their words are content
        elif checked.reason in _QUOTES and not content:
            reason = str(checked)
        _verdict(
            span, "stopped", _RULES.get(checked.reason, str(checked.reason)), reason, str(checked)
        )
        return
    shown = checked.shown
    approval = checked.tool in require_approval
    if shown is None:
        _verdict(span, "allowed", "require_approval" if approval else "allow")
    elif shown.by_human:
        _verdict(span, "answered", "require_approval")
    else:
        reason, _ = parse_stop_reason(shown.error or "invalid_action")
        result = "reminded" if reason is StopReason.LOOP_DETECTED else "refused"
        rule = "repeat_reminders" if result == "reminded" else _RULES.get(reason, str(reason))
        said = shown.text
        if reason in _QUOTES and not content:
            said = str(shown.error)
        _verdict(span, result, rule, said[:300])


_QUOTES = frozenset({StopReason.TOOL_BAD_ARGS, StopReason.INVALID_ACTION})
"""Stops whose message may quote a call's arguments (a schema's complaint names the value)."""


def _asked_rule(asked: GraphInterrupt) -> str:
    """What the question is about: a budget the policy asks about before it stops the run
    (``on_budget="ask"``), else the call's approval."""
    for pending in asked.args[0] if asked.args else ():
        question = getattr(pending, "value", None)
        if isinstance(question, dict) and question.get("kind") == "budget":
            try:
                reason, _ = parse_stop_reason(str(question.get("tool")))
            except ValueError:
                return "budget"
            return _RULES.get(reason, "budget")
    return "require_approval"


_RULES = {
    StopReason.MAX_STEPS: "budget.max_steps",
    StopReason.MAX_TOOL_CALLS: "budget.max_tool_calls",
    StopReason.MAX_SECONDS: "budget.max_seconds",
    StopReason.MAX_TOKENS: "budget.max_tokens",
    StopReason.TOOL_LIMIT: "budget.tool_limits",
    StopReason.LOOP_DETECTED: "loop_detection",
    StopReason.TOOL_MISSING: "allow",
    StopReason.TOOL_DENIED: "allow",
    StopReason.TOOL_REJECTED: "require_approval",
    StopReason.APPROVAL_UNAVAILABLE: "require_approval",
}
"""The policy field behind each stop the gate can cause."""


def _verdict(
    span: Span, result: str, rule: str, reason: str | None = None, stop: str | None = None
) -> None:
    attributes = {"gen_ai.guardrail.result.type": "decision", RESULT: result, RULE: rule}
    if reason:
        attributes["gen_ai.guardrail.result.reason"] = reason
    if stop:
        attributes["gated_react.stop_reason"] = stop
    span.set_attributes(attributes)
    span.add_event("gen_ai.guardrail.result", attributes)
