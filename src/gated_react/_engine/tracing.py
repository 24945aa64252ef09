"""OpenTelemetry spans of a run, named and attributed after the GenAI semantic conventions
(Development status; open-telemetry/semantic-conventions-genai as of 2026-12, on
semantic-conventions 1.44).

Only the OpenTelemetry API is used: every call here is the API's no-op until the application
(or the CLI, the workers, the Studio graphs: ``gated_react.otel``) installs an SDK, and the
helpers return before building any attribute when the span does not record.

One ``invoke_agent`` span per invocation of the graph (invoke, stream, resume, and runs under
``langgraph dev``) is opened and closed by ``AgentSpans``, which the graph carries as a *local*
callback handler: it sees the graph's own start and end, nothing inside. The nodes find that
span by the invocation's run id (the parent run id of the callbacks LangGraph hands each task),
so the spans they open are its children on whatever thread or task the node runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from gated_react._engine.span_content import Labels, masked_json, messages_json, output_json
from gated_react._engine.tool_runner import ToolTimeout
from gated_react.errors import one_line
from gated_react.redact import redact
from gated_react.state import Call
from gated_react.stops import is_failure

__all__ = [
    "AgentSpans",
    "Labels",
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
    """Opens each invocation's ``invoke_agent`` span and closes it with how the run stands,
    and maps every run inside it (LangGraph's task runs, tools, chains) to that span, so a
    node finds its invocation's span from the callbacks it was handed. A run whose parent it
    has not seen starts an invocation: the graph called directly, by ``runs``, by a server, or
    as a tool of another agent (whose span is then the current one, so this one nests)."""

    run_inline = True  # in the caller's context (no executor hop), so an app's span is the parent

    def __init__(self, labels: Labels) -> None:
        self.labels = labels
        self._runs: dict[UUID, Span] = {}
        self._roots: set[UUID] = set()

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
                _outcome(span, outputs)
            span.end()

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        span = self._runs.pop(run_id, None)
        if span is None or run_id not in self._roots:
            return
        self._roots.discard(run_id)
        if isinstance(error, GraphInterrupt):  # a graph nested in another one pauses this way
            span.set_attribute("gated_react.status", "paused")
        else:
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, _line(error, self.labels)))
        span.end()

    def _open(self, metadata: Mapping[str, Any]) -> Span:
        attributes = {OP: "invoke_agent", AGENT: self.labels.agent}
        attributes |= {PROVIDER: self.labels.provider, MODEL: self.labels.model}
        thread = metadata.get("thread_id")
        if thread is not None:
            attributes[CONVERSATION] = str(thread)
        name = f"invoke_agent {self.labels.agent}"
        return TRACER.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)

    def root(self, config: RunnableConfig) -> Span | None:
        """The invocation span of the node that was handed ``config``."""
        run_id = getattr(config.get("callbacks"), "parent_run_id", None)
        return self._runs.get(run_id) if run_id is not None else None


def _outcome(span: Span, outputs: Mapping[str, Any]) -> None:
    """The run's status, stop reason and usage; a failure (model or tool) is an error status."""
    status = outputs.get("status") or "paused"  # returned without an end: waiting on a human
    span.set_attribute("gated_react.status", status)
    usage = outputs.get("usage") or {}
    for key in ("steps", "tool_calls", "tokens", "cached_tokens"):
        if isinstance(usage.get(key), int):
            span.set_attribute(f"gated_react.usage.{key}", usage[key])
    reason = outputs.get("stop_reason")
    if not reason:
        return
    span.set_attribute("gated_react.stop_reason", reason)
    if status == "stopped" and _failed(reason):
        span.set_attribute("error.type", reason)
        span.set_status(Status(StatusCode.ERROR, str(outputs.get("message") or reason)[:300]))


def _failed(reason: str) -> bool:
    try:
        return is_failure(reason)
    except ValueError:  # a reason this version does not know: not ours to call a failure
        return False


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
    here = _traceparent(root.get_span_context())
    if earlier == here:
        return {}
    before = _span_context(earlier)
    if before is not None:
        root.add_link(before, {"gated_react.link": "earlier invocation of this run"})
    return {"traceparent": here}


def _traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _span_context(value: str | None) -> SpanContext | None:
    parts = (value or "").split("-")
    if len(parts) != 4:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))


@contextmanager
def chat(spans: AgentSpans, config: RunnableConfig) -> Iterator[Span]:
    """The ``chat <model>`` span of one model call, current while the call runs (so an HTTP
    client's own spans nest under it)."""
    labels = spans.labels
    attributes = {OP: "chat", PROVIDER: labels.provider, MODEL: labels.model}
    span = TRACER.start_span(
        f"chat {labels.model}", parent(spans, config), SpanKind.CLIENT, attributes=attributes
    )
    with trace.use_span(span, end_on_exit=True, record_exception=False):
        yield span


def replied(spans: AgentSpans, span: Span, sent: list[Any], message: Any) -> None:
    """What the provider reported for a reply: tokens (cached input counted inside input, as the
    conventions say), the responding model, and the messages when content capture is on."""
    if not span.is_recording():
        return
    usage = getattr(message, "usage_metadata", None) or {}
    if usage:
        span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("input_tokens") or 0))
        span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("output_tokens") or 0))
        cached = (usage.get("input_token_details") or {}).get("cache_read")
        if cached is not None:
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", int(cached))
    metadata = getattr(message, "response_metadata", None) or {}
    if metadata.get("model_name"):
        span.set_attribute("gen_ai.response.model", str(metadata["model_name"]))
    if metadata.get("finish_reason"):
        span.set_attribute("gen_ai.response.finish_reasons", [str(metadata["finish_reason"])])
    labels = spans.labels
    if labels.content:
        span.set_attribute("gen_ai.input.messages", messages_json(sent, labels.secrets))
        span.set_attribute("gen_ai.output.messages", output_json(message, labels.secrets))


def chat_failed(span: Span, stop_reason: str, message: str) -> None:
    """A model call that ended the run (timeout, provider error); the message is already
    masked (it went into the state)."""
    span.set_attribute("error.type", stop_reason)
    span.set_status(Status(StatusCode.ERROR, message[:300]))


@contextmanager
def tool(spans: AgentSpans, config: RunnableConfig, call: Call) -> Iterator[Span]:
    """The ``execute_tool <tool>`` span of one call, current while the tool runs."""
    attributes = {
        OP: "execute_tool",
        TOOL: call.tool,
        CALL_ID: call.key,
        "gen_ai.tool.type": "function",
    }
    if spans.labels.content:
        attributes["gen_ai.tool.call.arguments"] = masked_json(call.args, spans.labels.secrets)
    span = TRACER.start_span(
        f"execute_tool {call.tool}",
        parent(spans, config),
        SpanKind.INTERNAL,
        attributes=attributes,
    )
    with trace.use_span(span, end_on_exit=True, record_exception=False):
        yield span


def tool_done(spans: AgentSpans, span: Span, value: Any) -> None:
    """A call that returned (its value recorded only with content capture on)."""
    if span.is_recording():
        span.set_attribute("gated_react.tool.outcome", "ok")
        if spans.labels.content:
            secrets = spans.labels.secrets
            span.set_attribute("gen_ai.tool.call.result", masked_json(value, secrets))


def tool_failed(spans: AgentSpans, span: Span, error: BaseException) -> None:
    """A call that raised or ran out of time."""
    timed_out = isinstance(error, ToolTimeout)
    if span.is_recording():
        span.set_attribute("gated_react.tool.outcome", "timeout" if timed_out else "error")
        span.set_attribute("error.type", "timeout" if timed_out else type(error).__qualname__)
        span.set_status(Status(StatusCode.ERROR, _line(error, spans.labels)))


def _line(error: BaseException, labels: Labels) -> str:
    return redact(one_line(str(error) or type(error).__name__), *labels.secrets)[:300]
