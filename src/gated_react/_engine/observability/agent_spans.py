"""The ``invoke_agent`` span of each invocation (invoke, stream, resume, ``langgraph dev``), and
what every span of a run shares: the tracer, the conventions' attribute names, whether an SDK
records at all (``api_alone``).

``AgentSpans``, a callback handler the graph carries, opens one ``invoke_agent`` span per
invocation and maps every run inside it to that span, so a node finds it from the callbacks
LangGraph hands it, on any thread or task. At its end the span says how the run stands (invoke's
output) and what the run has spent, read from the run's record (never from the state): the
nodes say which run they serve (``AgentSpans.note``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

from gated_react._engine.observability.span_content import (
    Labels,
    aquiet,
    quiet,
    record_error,
    record_outcome,
    span_context,
    traceparent,
)
from gated_react.state import Usage

__all__ = ["TRACER", "AgentSpans", "Invocation", "RunRecord", "api_alone", "carry", "parent"]

TRACER = trace.get_tracer("gated_react")

OP, PROVIDER, MODEL = "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model"
AGENT, CONVERSATION = "gen_ai.agent.name", "gen_ai.conversation.id"
TOOL, CALL_ID = "gen_ai.tool.name", "gen_ai.tool.call.id"


class RunRecord(Protocol):
    """Where an invocation's run keeps its record: a node's ``authority.ledger.Place``, handed
    in by the nodes (the authority imports the deps these spans belong to, so this module
    cannot import it)."""

    @property
    def awaited(self) -> bool:
        """Whether the record is read with ``await`` (an async saver's table)."""
        ...

    def usage(self, run: str) -> Usage: ...

    async def ausage(self, run: str) -> Usage: ...


@dataclass(slots=True)
class Invocation:
    """One invocation: its span, and the run whose usage the span reports when it ends."""

    span: Span
    run_id: UUID
    """The invocation's own (root) run."""
    record: RunRecord | None = None
    run: str | None = None

    def usage(self) -> Usage | None:
        if self.record is None or self.run is None:
            return None  # no node said which run it served (a node called by hand)
        return self.record.usage(self.run)

    async def ausage(self) -> Usage | None:
        if self.record is None or self.run is None or not self.record.awaited:
            return self.usage()
        return await self.record.ausage(self.run)

    def close(self, outputs: Any, usage: Usage | None, content: bool) -> None:
        span = self.span
        if span.is_recording() and isinstance(outputs, Mapping):
            quiet(record_outcome)(span, outputs, usage, content)
        span.end()


class AgentSpans(BaseCallbackHandler):
    """Opens each invocation's span, closes it with how the run stands, and maps every run
    inside it (task runs, tools, chains) to it. A run whose parent it has not seen starts an
    invocation: the graph called directly, by ``runs``, by a server, or as another agent's
    tool (whose ``execute_tool`` span is then current, so this one nests under it).

    The span's usage is the run's, read from its record when the invocation ends (the nodes
    say which run that is: ``note``), never from the state."""

    run_inline = True  # in the caller's context (no executor hop), so an app's span is the parent

    def __init__(self, labels: Labels) -> None:
        self.labels = labels
        self._runs: dict[UUID, Invocation] = {}
        self._awaiting: set[UUID] = set()
        """Open invocations whose run's record is read with ``await``."""

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
            root = Invocation(self._open(kwargs.get("metadata") or {}), run_id)
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

    @property
    def on_chain_end(self) -> Callable[..., Any]:
        """The sync handler, or its async twin while an invocation whose record is read with
        ``await`` is open: LangChain's async callback manager awaits a coroutine function,
        and a sync callback could not read that record without blocking the loop it needs."""
        return self._aend if self._awaiting else self._end

    def _end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        invocation = self._ending(run_id)
        if invocation is not None:
            invocation.close(outputs, quiet(invocation.usage)(), self.labels.content)

    async def _aend(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        invocation = self._ending(run_id)
        if invocation is not None:
            usage = await aquiet(invocation.ausage)()
            invocation.close(outputs, usage, self.labels.content)

    def _ending(self, run_id: UUID) -> Invocation | None:
        """The invocation ``run_id`` ends, if it is one's own run (a node's ends nothing)."""
        invocation = self._runs.pop(run_id, None)
        if invocation is None or invocation.run_id != run_id:
            return None
        self._awaiting.discard(run_id)
        return invocation

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        invocation = self._ending(run_id)
        if invocation is None:
            return
        span = invocation.span
        if isinstance(error, GraphInterrupt):  # a graph nested in another one pauses this way
            span.set_attribute("gated_react.status", "paused")
        else:
            quiet(record_error)(span, type(error).__qualname__, error, self.labels)
        span.end()

    def _open(self, metadata: Mapping[str, Any]) -> Span:
        labels, thread = self.labels, metadata.get("thread_id")
        attributes = {OP: "invoke_agent", AGENT: labels.agent, PROVIDER: labels.provider}
        attributes |= {MODEL: labels.model, **dict(labels.run)}
        if thread is not None:
            attributes[CONVERSATION] = str(thread)
        name = f"invoke_agent {labels.agent}"
        return TRACER.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)

    def invocation(self, config: RunnableConfig) -> Invocation | None:
        """The invocation of the node that was handed ``config``."""
        if not self._runs:  # no SDK, or a node called by hand
            return None
        run_id = getattr(config.get("callbacks"), "parent_run_id", None)
        return self._runs.get(run_id) if run_id is not None else None

    def root(self, config: RunnableConfig) -> Span | None:
        """The invocation span of the node that was handed ``config``."""
        invocation = self.invocation(config)
        return invocation.span if invocation is not None else None

    def note(self, config: RunnableConfig, record: RunRecord, run: str) -> None:
        """The node handed ``config`` serves ``run``, whose record is ``record``: the usage
        its invocation's span reports at the end is read from there."""
        invocation = self.invocation(config)
        if invocation is None:
            return
        invocation.record, invocation.run = record, run
        if record.awaited:
            self._awaiting.add(invocation.run_id)


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
