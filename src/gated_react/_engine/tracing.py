"""OpenTelemetry spans of a run after the GenAI semantic conventions (Development status;
open-telemetry/semantic-conventions-genai as of 2026-12, on semantic-conventions 1.44). API
only: a no-op until an SDK is installed (``gated_react.hosting.otel`` does it for the processes this
package hosts), and the helpers return before building attributes when a span does not record.

``AgentSpans``, a callback handler the graph carries, opens one ``invoke_agent`` span per
invocation (invoke, stream, resume, ``langgraph dev``) and maps every run inside it to that
span, so a node finds it from the callbacks LangGraph hands it, on any thread or task.

Tracing never breaks a run: each helper that builds or records a span is ``quiet``, so an error
in it (an exporter's, an attribute that will not encode) is counted in ``SPAN_FAILURES`` and the
run goes on; a span may then lack that attribute, the state is as it would be without tracing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode

from gated_react._engine.pricing import Tokens
from gated_react._engine.span_content import (
    SPAN_FAILURES,
    Labels,
    masked_json,
    messages_json,
    output_json,
    quiet,
    record_outcome,
    span_context,
    traceparent,
)
from gated_react._engine.tool_runner import ToolTimeout
from gated_react.errors import one_line
from gated_react.redact import redact
from gated_react.state import Call

__all__ = [
    "SPAN_FAILURES",
    "AgentSpans",
    "Labels",
    "api_alone",
    "carry",
    "chat",
    "chat_failed",
    "parent",
    "replied",
    "tool",
    "tool_done",
    "tool_failed",
]

TRACER = trace.get_tracer("gated_react")

OP, PROVIDER, MODEL = "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model"
AGENT, CONVERSATION = "gen_ai.agent.name", "gen_ai.conversation.id"
TOOL, CALL_ID = "gen_ai.tool.name", "gen_ai.tool.call.id"


class AgentSpans(BaseCallbackHandler):
    """Opens each invocation's span, closes it with how the run stands, and maps every run
    inside it (task runs, tools, chains) to it. A run whose parent it has not seen starts an
    invocation: the graph called directly, by ``runs``, by a server, or as another agent's
    tool (whose ``execute_tool`` span is then current, so this one nests under it)."""

    run_inline = True  # in the caller's context (no executor hop), so an app's span is the parent

    def __init__(self, labels: Labels) -> None:
        self.labels = labels
        self._runs: dict[UUID, Span] = {}
        self._roots: set[UUID] = set()

    @property
    def ignore_chain(self) -> bool:
        return api_alone()

    @property
    def ignore_agent(self) -> bool:  # tool events
        return api_alone()

    @property
    def ignore_llm(self) -> bool:
        return True

    @property
    def ignore_chat_model(self) -> bool:
        return True

    @property
    def ignore_retriever(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        root = self._runs.get(parent_run_id) if parent_run_id is not None else None
        if root is None:
            root = self._open(kwargs.get("metadata") or {})
            self._roots.add(run_id)
        self._runs[run_id] = root

    def on_tool_start(
        self,
        serialized: Any,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        root = self._runs.get(parent_run_id) if parent_run_id is not None else None
        if root is not None:  # a tool's own runs (another agent, say) stay inside
            self._runs[run_id] = root

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._runs.pop(run_id, None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._runs.pop(run_id, None)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        span = self._runs.pop(run_id, None)
        if span is not None and run_id in self._roots:
            self._roots.discard(run_id)
            if span.is_recording() and isinstance(outputs, Mapping):
                quiet(record_outcome)(span, outputs, self.labels.content)
            span.end()

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        span = self._runs.pop(run_id, None)
        if span is None or run_id not in self._roots:
            return
        self._roots.discard(run_id)
        if isinstance(error, GraphInterrupt):  # a graph nested in another one pauses this way
            span.set_attribute("gated_react.status", "paused")
        else:
            quiet(_failed)(span, type(error).__qualname__, error, self.labels)
        span.end()

    def _open(self, metadata: Mapping[str, Any]) -> Span:
        labels, thread = self.labels, metadata.get("thread_id")
        attributes = {OP: "invoke_agent", AGENT: labels.agent, PROVIDER: labels.provider}
        attributes |= {MODEL: labels.model, **dict(labels.run)}
        if thread is not None:
            attributes[CONVERSATION] = str(thread)
        name = f"invoke_agent {labels.agent}"
        return TRACER.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)

    def root(self, config: RunnableConfig) -> Span | None:
        """The invocation span of the node that was handed ``config``."""
        run_id = getattr(config.get("callbacks"), "parent_run_id", None)
        return self._runs.get(run_id) if run_id is not None else None


def api_alone() -> bool:
    """No SDK installed: nothing could record, so the handler skips every event and the
    nodes build no span (asked each time, so an SDK installed later counts from then on).

    Asked a dozen times a step, so it reads the global the API's own ``ProxyTracer`` reads:
    ``get_tracer_provider()`` looks ``OTEL_PYTHON_TRACER_PROVIDER`` up in the environment on
    every call while none is set (0.75% of a step's instructions), though that variable names
    a provider only once, when the API is first asked (at this module's import, for ``TRACER``)."""
    provider = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is _UNKNOWN:  # an API that keeps it elsewhere: asked the public way
        provider = trace.get_tracer_provider()
    return provider is None or isinstance(provider, trace.ProxyTracerProvider)


_UNKNOWN: Any = object()


def parent(spans: AgentSpans, config: RunnableConfig) -> Context | None:
    """The invocation's span as a parent; None (the current context) for a node called alone."""
    root = spans.root(config)
    return trace.set_span_in_context(root) if root is not None else None


def carry(spans: AgentSpans, earlier: str | None, config: RunnableConfig) -> dict[str, Any]:
    """Link this invocation's span to the one that ran before it on the thread (as stored in
    state), and the update that stores this one's for the next; empty when nothing records."""
    root = spans.root(config)
    if root is None or not root.is_recording():
        return {}
    here = traceparent(root.get_span_context())
    if earlier == here:
        return {}
    before = span_context(earlier)
    if before is not None:
        root.add_link(before, {"gated_react.link": "earlier invocation of this run"})
    return {"traceparent": here}


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
        _failed(span, "timeout" if timed_out else type(error).__qualname__, error, spans.labels)


def _failed(span: Span, kind: str, error: BaseException, labels: Labels) -> None:
    """An error status: described by the error's text (masked) only with content capture on,
    else by its type (the text may quote arguments: a card number, a customer's name)."""
    span.set_attribute("error.type", kind)
    if not labels.content:
        span.set_status(Status(StatusCode.ERROR, kind))
        return
    said = redact(one_line(str(error) or type(error).__name__), *labels.secrets)
    span.set_status(Status(StatusCode.ERROR, said[:300]))
