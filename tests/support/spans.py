"""Spans in memory: the OpenTelemetry SDK installed once in the test process, with a sampler
that drops every span except inside ``recorded()``, so other tests build no span at all.

``tour`` is the run the tracing tests (in memory and against Phoenix) look at: an allowed call,
a refused call, an approval pause and its resume, and a stop.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from gated_react import Policy, build_graph
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS


class _Switch(Sampler):
    on = False

    def should_sample(  # noqa: PLR0917 (the SDK's signature)
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        if self.on:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
        return SamplingResult(Decision.DROP)

    def get_description(self) -> str:
        return "on only inside recorded()"


class _Forward(SpanProcessor):
    """Hands finished spans to ``target`` while one is set (a provider's processors are fixed)."""

    target: SpanProcessor | None = None

    def on_end(self, span: ReadableSpan) -> None:
        if self.target is not None:
            self.target.on_end(span)


_SWITCH = _Switch()
_EXPORTER = InMemorySpanExporter()
_FORWARD = _Forward()
_installed: list[TracerProvider] = []


def install() -> TracerProvider:
    """The process's tracer provider (installed on first use)."""
    if not _installed:
        provider = TracerProvider(sampler=_SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        provider.add_span_processor(_FORWARD)
        trace.set_tracer_provider(provider)
        _installed.append(provider)
    return _installed[0]


@contextmanager
def recorded() -> Iterator[InMemorySpanExporter]:
    """Spans started inside the block, finished ones in ``get_finished_spans()``."""
    install()
    _EXPORTER.clear()
    _SWITCH.on = True
    try:
        yield _EXPORTER
    finally:
        _SWITCH.on = False


@contextmanager
def exported(endpoint: str) -> Iterator[InMemorySpanExporter]:
    """``recorded()``, every span also sent over OTLP/HTTP to ``endpoint`` as it ends."""
    sender = SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
    _FORWARD.target = sender
    try:
        with recorded() as exporter:
            yield exporter
    finally:
        _FORWARD.target = None
        sender.shutdown()


TOUR_POLICY = Policy(
    allow=frozenset({"get_user_profile", "get_user_billing"}),
    require_approval=frozenset({"get_user_billing"}),
    on_tool_error="observe",
)
"""Profile allowed, billing allowed after a human approves, search_policy refused (shown)."""


def tour_graph() -> Any:
    """Profile (allowed), search_policy (refused), billing (asks a human; approve it with
    ``resume``), then profile again: a repeat, so the run stops with ``loop_detected``."""
    replies = [
        call("get_user_profile", user_id=42),
        call("search_policy", query="refund"),
        call("get_user_billing", user_id=42),
        call("get_user_profile", user_id=42),
    ]
    model = ScriptedChatModel(replies=replies)
    return build_graph(model, SUPPORT_TOOLS, policy=TOUR_POLICY, checkpointer=InMemorySaver())


APPROVE = {"decisions": [{"type": "approve"}]}
TOUR_FIRST = [
    "chat scripted",
    "apply_guardrail gate",
    "execute_tool get_user_profile",
    "chat scripted",
    "apply_guardrail gate",
    "chat scripted",
    "apply_guardrail gate",
]
"""The children of the tour's first invocation (it pauses at the billing approval)."""
TOUR_SECOND = [
    "apply_guardrail gate",
    "execute_tool get_user_billing",
    "chat scripted",
    "apply_guardrail gate",
]
"""The children of its resume (approved, then the repeated profile call stops it)."""
TOUR_VERDICTS = [
    ("get_user_profile", "allowed"),
    ("search_policy", "refused"),
    ("get_user_billing", "asked_human"),
    ("get_user_billing", "allowed"),
    ("get_user_profile", "stopped"),
]
"""The gate's verdicts on the tour's five proposed calls, in order."""


def tree(spans: Sequence[ReadableSpan]) -> dict[int, list[str]]:
    """Span names by parent span id (0 for roots), in start order."""
    out: dict[int, list[str]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else 0
        out.setdefault(parent, []).append(span.name)
    return out
