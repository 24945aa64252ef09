"""OpenTelemetry spans of a run after the GenAI semantic conventions (Development status;
open-telemetry/semantic-conventions-genai as of 2026-12, on semantic-conventions 1.44). API
only: a no-op until an SDK is installed (``gated_react.hosting.otel`` does it for the processes this
package hosts), and the helpers return before building attributes when a span does not record.

Here the ``chat`` span of each model call and the ``execute_tool`` span of each tool call, both
children of their invocation's ``invoke_agent`` span (``agent_spans``).

Tracing never breaks a run: each helper that builds or records a span is ``quiet``, so an error
in it (an exporter's, an attribute that will not encode) is counted in ``SPAN_FAILURES`` and the
run goes on; a span may then lack that attribute, the state is as it would be without tracing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode

from gated_react._engine.execution.tool_runner import ToolTimeout
from gated_react._engine.model.pricing import Tokens
from gated_react._engine.observability.agent_spans import (
    CALL_ID,
    MODEL,
    OP,
    PROVIDER,
    TOOL,
    TRACER,
    AgentSpans,
    api_alone,
    parent,
)
from gated_react._engine.observability.span_content import (
    SPAN_FAILURES,
    Labels,
    masked_json,
    messages_json,
    output_json,
    quiet,
    record_error,
)
from gated_react.state import Call

__all__ = [
    "SPAN_FAILURES",
    "chat",
    "chat_failed",
    "replied",
    "tool",
    "tool_done",
    "tool_failed",
]


@contextmanager
def chat(spans: AgentSpans, config: RunnableConfig) -> Iterator[Span]:
    """The ``chat <model>`` span of one model call, current while the call runs (so an HTTP
    client's own spans nest under it)."""
    if api_alone():
        yield INVALID_SPAN
        return
    labels = spans.labels
    attributes = {OP: "chat", PROVIDER: labels.provider, MODEL: labels.model}
    span = TRACER.start_span(
        f"chat {labels.model}", parent(spans, config), SpanKind.CLIENT, attributes=attributes
    )
    with trace.use_span(span, end_on_exit=True, record_exception=False):
        yield span


@quiet
def replied(
    spans: AgentSpans,
    span: Span,
    exchange: tuple[list[Any], Any],
    tokens: Tokens | None,
    cost: float | None,
) -> None:
    """What the provider reported for a reply (messages sent, reply): tokens (cached input
    counted inside input, as the conventions say), its cost in USD (absent when unpriced), the
    responding model, and the messages when content capture is on."""
    if not span.is_recording():
        return
    sent, message = exchange
    if tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", tokens.input)
        span.set_attribute("gen_ai.usage.output_tokens", tokens.output)
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", tokens.cached)
        if tokens.cache_write:
            span.set_attribute("gen_ai.usage.cache_creation.input_tokens", tokens.cache_write)
    if cost is not None:
        span.set_attribute("gated_react.usage.cost", cost)
    metadata = getattr(message, "response_metadata", None) or {}
    if metadata.get("model_name"):
        span.set_attribute("gen_ai.response.model", str(metadata["model_name"]))
    if metadata.get("finish_reason"):
        span.set_attribute("gen_ai.response.finish_reasons", [str(metadata["finish_reason"])])
    labels = spans.labels
    if labels.content:
        sent_json = messages_json(sent, labels.secrets, labels.limit)
        span.set_attribute("gen_ai.input.messages", sent_json)
        said = output_json(message, labels.secrets, labels.limit)
        span.set_attribute("gen_ai.output.messages", said)


@quiet
def chat_failed(spans: AgentSpans, span: Span, stop_reason: str, message: str) -> None:
    """A model call that ended the run (timeout, provider error); the message (already
    masked: it went into the state) describes it only with content capture on."""
    span.set_attribute("error.type", stop_reason)
    said = message if spans.labels.content else stop_reason
    span.set_status(Status(StatusCode.ERROR, said[:300]))


@contextmanager
def tool(spans: AgentSpans, config: RunnableConfig, call: Call) -> Iterator[Span]:
    """The ``execute_tool <tool>`` span of one call, current while the tool runs."""
    if api_alone():
        yield INVALID_SPAN
        return
    attributes = {
        OP: "execute_tool",
        TOOL: call.tool,
        CALL_ID: call.key,
        "gen_ai.tool.type": "function",
    }
    if spans.labels.content:
        arguments = quiet(_content)(spans.labels, call.args)
        if arguments is not None:
            attributes["gen_ai.tool.call.arguments"] = arguments
    span = TRACER.start_span(
        f"execute_tool {call.tool}",
        parent(spans, config),
        SpanKind.INTERNAL,
        attributes=attributes,
    )
    with trace.use_span(span, end_on_exit=True, record_exception=False):
        yield span


def _content(labels: Labels, value: Any) -> str:
    """Arguments or a result as a span keeps them: bounded and masked like an observation."""
    return masked_json(value, labels.secrets, labels.limit)


@quiet
def tool_done(spans: AgentSpans, span: Span, value: Any) -> None:
    """A call that returned (its value recorded only with content capture on)."""
    if span.is_recording():
        span.set_attribute("gated_react.tool.outcome", "ok")
        if spans.labels.content:
            shown = value.content if isinstance(value, ToolMessage) else value
            span.set_attribute("gen_ai.tool.call.result", _content(spans.labels, shown))


@quiet
def tool_failed(spans: AgentSpans, span: Span, error: BaseException) -> None:
    """A call that raised or ran out of time."""
    timed_out = isinstance(error, ToolTimeout)
    if span.is_recording():
        span.set_attribute("gated_react.tool.outcome", "timeout" if timed_out else "error")
        record_error(
            span, "timeout" if timed_out else type(error).__qualname__, error, spans.labels
        )
