"""What the spans of a graph carry: names for its agent and model, how an invocation ended,
the trace context a thread keeps for its next invocation's link, and, only when the user opted
in (the GenAI conventions' ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``), messages,
arguments and results as the conventions' JSON, secrets masked either way.

Content is the state's own bounded form of an outside value (``tool_runner.storable``: nesting
and cycles bounded), masked, then cut to ``Policy.max_observation_chars``: masking first, so a
secret the cut would split is masked whole. With capture off, no argument, result or error
text reaches a span: a failure says its error type or stop reason only."""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from opentelemetry.trace import Span, SpanContext, Status, StatusCode, TraceFlags

from gated_react._engine.execution.tool_runner import cut, storable
from gated_react._engine.model.pricing import model_name
from gated_react.errors import one_line
from gated_react.redact import redact
from gated_react.state import RunContext, Usage
from gated_react.stops import is_failure

_MAX_CHARS = 4000
"""Longest text one captured part keeps when no policy says (``Policy.max_observation_chars``'s
default)."""
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


SPAN_FAILURES: Counter[str] = Counter()
"""Errors raised while building or recording a span, by helper, since the process started:
swallowed (a trace is never worth a run), counted here so a test or an operator can see them."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def quiet(helper: Callable[_P, _R]) -> Callable[_P, _R | None]:
    """``helper``, with any error it raises counted in ``SPAN_FAILURES`` instead (None then):
    tracing never breaks a run."""

    @functools.wraps(helper)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        try:
            return helper(*args, **kwargs)
        except Exception:  # an exporter's bug, an attribute that will not encode
            SPAN_FAILURES[helper.__name__] += 1
            return None

    return guarded


def aquiet(helper: Callable[_P, Awaitable[_R]]) -> Callable[_P, Awaitable[_R | None]]:
    """Async ``quiet``."""

    @functools.wraps(helper)
    async def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        try:
            return await helper(*args, **kwargs)
        except Exception:
            SPAN_FAILURES[helper.__name__] += 1
            return None

    return guarded


@dataclass(frozen=True, slots=True)
class Labels:
    """Built once per graph: names every span carries, what the invocation span says the run
    ran under, and whether content may be recorded."""

    agent: str = "gated-react"
    provider: str = "unknown"
    model: str = "unknown"
    content: bool = False
    secrets: tuple[str, ...] = ()
    policy_hash: str | None = None
    """The run context's short policy hash: the guardrail spans' ``gen_ai.guardrail.policy.id``."""
    run: tuple[tuple[str, str], ...] = ()
    """The run context as attributes of the invocation span (model class, base URL masked,
    protocol, policy and its hash, prices' source, package version)."""
    limit: int = _MAX_CHARS
    """The longest text one captured part keeps: the policy's ``max_observation_chars``."""

    @classmethod
    def of(
        cls,
        model: BaseChatModel,
        secrets: tuple[str, ...] = (),
        context: RunContext | None = None,
        content: bool = False,
    ) -> Labels:
        """The model's provider and name as LangChain reports them (``_get_ls_params`` is what
        its own tracers read), the run context, and the content switch (``build_graph`` reads
        it from the environment: ``settings.capture_content``)."""
        try:
            params: dict[str, Any] = dict(model._get_ls_params())
        except Exception:  # a model that cannot say: the span still names it
            params = {}
        return cls(
            provider=str(params.get("ls_provider") or "unknown"),
            # the name it is priced by (``scripted`` for ScriptedChatModel), so a span and
            # ``Policy.prices`` name a model alike
            model=str(params.get("ls_model_name") or model_name(model)),
            content=content,
            secrets=secrets,
            policy_hash=context.policy_hash if context is not None else None,
            run=_run_attributes(context) if context is not None else (),
            limit=_limit(context),
        )


def _limit(context: RunContext | None) -> int:
    found = context.policy.get("max_observation_chars") if context is not None else None
    return found if isinstance(found, int) and found > 0 else _MAX_CHARS


def _run_attributes(context: RunContext) -> tuple[tuple[str, str], ...]:
    found = {
        "gen_ai.agent.version": context.version,
        "gated_react.model.class": context.model_class,
        "gated_react.model.name": context.model,
        "gated_react.model.base_url": context.base_url,
        "gated_react.protocol": context.protocol,
        "gated_react.policy.hash": context.policy_hash,
        "gated_react.policy": json.dumps(context.policy, sort_keys=True),
        "gated_react.priced_by": context.priced_by,
    }
    return tuple((key, value) for key, value in found.items() if value is not None)


def masked(value: Any, secrets: tuple[str, ...], limit: int = _MAX_CHARS) -> Any:
    """``value`` as the state bounds it (``storable``), every string masked, then cut to
    ``limit`` characters of JSON text (a cut value is that text); never raises."""
    data = _redacted(storable(value, secrets), secrets)
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return data if len(text) <= limit else cut(text, limit)


def masked_json(value: Any, secrets: tuple[str, ...], limit: int = _MAX_CHARS) -> str:
    """``value`` bounded and masked as JSON text, cut to ``limit`` characters: span attributes
    hold strings, not structures."""
    data = _redacted(storable(value, secrets), secrets)
    return cut(json.dumps(data, ensure_ascii=False), limit)


def _redacted(data: Any, secrets: tuple[str, ...]) -> Any:
    """Plain data (nesting already bounded by ``storable``) with every string redacted."""
    if isinstance(data, str):
        return redact(data, *secrets)
    if isinstance(data, dict):
        return {redact(key, *secrets): _redacted(item, secrets) for key, item in data.items()}
    if isinstance(data, list):
        return [_redacted(item, secrets) for item in data]
    return data


def _text(message: BaseMessage, secrets: tuple[str, ...], limit: int) -> str:
    text = message.text if isinstance(message.text, str) else str(message.content)
    return str(masked(text, secrets, limit))


def _parts(message: BaseMessage, secrets: tuple[str, ...], limit: int) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if isinstance(message, ToolMessage):
        result = _text(message, secrets, limit)
        return [{"type": "tool_call_response", "id": message.tool_call_id, "result": result}]
    text = _text(message, secrets, limit)
    if text:
        parts.append({"type": "text", "content": text})
    for call in getattr(message, "tool_calls", None) or []:
        arguments = masked(call.get("args"), secrets, limit)
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": redact(str(call["name"]), *secrets)[:limit],
                "arguments": arguments,
            }
        )
    return parts


def messages_json(messages: list[BaseMessage], secrets: tuple[str, ...], limit: int) -> str:
    """``gen_ai.input.messages``: the chat history sent, in order (the system prompt included
    as a system message, as the model received it), each part bounded by ``limit``."""
    shown = [
        {"role": _ROLES.get(m.type, m.type), "parts": _parts(m, secrets, limit)}
        for m in messages
        if isinstance(m, BaseMessage)
    ]
    return json.dumps(shown, ensure_ascii=False)


def output_json(message: BaseMessage, secrets: tuple[str, ...], limit: int) -> str:
    """``gen_ai.output.messages``: the one reply, with its finish reason when reported."""
    reply: dict[str, Any] = {"role": "assistant", "parts": _parts(message, secrets, limit)}
    if isinstance(message, AIMessage) and message.response_metadata.get("finish_reason"):
        reply["finish_reason"] = str(message.response_metadata["finish_reason"])
    return json.dumps([reply], ensure_ascii=False)


def traceparent(context: SpanContext) -> str:
    """A span's context as W3C ``traceparent`` text, the form state keeps it in."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def span_context(value: str | None) -> SpanContext | None:
    """``traceparent`` text back as a (remote) span context; None if it is not one."""
    parts = (value or "").split("-")
    if len(parts) != 4:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))


def record_outcome(
    span: Span, outputs: Mapping[str, Any], usage: Usage | None, content: bool = False
) -> None:
    """The run's status and stop reason (invoke's output), and its usage as its record says
    (None: no node said which run it was); a failure (model or tool) is an error status,
    described by the run's message only with content capture on (it may quote an error)."""
    status = outputs.get("status") or "paused"  # returned without an end: waiting on a human
    span.set_attribute("gated_react.status", status)
    if usage is not None:
        _record_usage(span, usage)
    reason = outputs.get("stop_reason")
    if not reason:
        return
    span.set_attribute("gated_react.stop_reason", reason)
    if status == "stopped" and _failed(reason):
        span.set_attribute("error.type", reason)
        said = str(outputs.get("message") or reason) if content else reason
        span.set_status(Status(StatusCode.ERROR, said[:300]))


def _record_usage(span: Span, usage: Usage) -> None:
    for key in _USAGE:
        value = getattr(usage, key)
        if value is not None:
            span.set_attribute(f"gated_react.usage.{key}", value)
    if usage.unpriced:
        span.set_attribute("gated_react.usage.unpriced", usage.unpriced)


_USAGE = ("steps", "tool_calls", "tokens", "input_tokens", "output_tokens", "cached_tokens", "cost")
"""The run's usage figures the invocation span carries (``cost`` in USD, absent if unpriced)."""


def _failed(reason: str) -> bool:
    try:
        return is_failure(reason)
    except ValueError:  # a reason this version does not know: not ours to call a failure
        return False


def record_error(span: Span, kind: str, error: BaseException, labels: Labels) -> None:
    """An error status: described by the error's text (masked) only with content capture on,
    else by its type (the text may quote arguments: a card number, a customer's name)."""
    span.set_attribute("error.type", kind)
    if not labels.content:
        span.set_status(Status(StatusCode.ERROR, kind))
        return
    said = redact(one_line(str(error) or type(error).__name__), *labels.secrets)
    span.set_status(Status(StatusCode.ERROR, said[:300]))


__all__ = [
    "SPAN_FAILURES",
    "Labels",
    "aquiet",
    "masked",
    "masked_json",
    "messages_json",
    "output_json",
    "quiet",
    "record_error",
    "record_outcome",
    "span_context",
    "traceparent",
]
