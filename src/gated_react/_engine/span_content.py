"""What the spans of a graph carry: names for its agent and model, how an invocation ended,
the trace context a thread keeps for its next invocation's link, and, only when the user opted
in (the GenAI conventions' ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``), messages,
arguments and results as the conventions' JSON, secrets masked either way."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from opentelemetry.trace import Span, SpanContext, Status, StatusCode, TraceFlags

from gated_react._engine.pricing import model_name
from gated_react.redact import redact
from gated_react.settings import capture_content
from gated_react.state import RunContext
from gated_react.stops import is_failure

_MAX_CHARS = 8000
"""Longest text one captured part keeps (the JSON stays whole; the text is cut)."""
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


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

    @classmethod
    def of(
        cls, model: BaseChatModel, secrets: tuple[str, ...] = (), context: RunContext | None = None
    ) -> Labels:
        """The model's provider and name as LangChain reports them (``_get_ls_params`` is what
        its own tracers read), the run context, and the content switch as the environment
        sets it."""
        try:
            params: dict[str, Any] = dict(model._get_ls_params())
        except Exception:  # a model that cannot say: the span still names it
            params = {}
        return cls(
            provider=str(params.get("ls_provider") or "unknown"),
            # the name it is priced by (``scripted`` for ScriptedChatModel), so a span and
            # ``Policy.prices`` name a model alike
            model=str(params.get("ls_model_name") or model_name(model)),
            content=capture_content(),
            secrets=secrets,
            policy_hash=context.policy_hash if context is not None else None,
            run=_run_attributes(context) if context is not None else (),
        )


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


def masked(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` as plain JSON data, every string masked and cut (anything else JSON cannot
    hold becomes its masked ``str``)."""
    if isinstance(value, str):
        return redact(value[:_MAX_CHARS], *secrets)
    if isinstance(value, dict):
        return {masked(str(k), secrets): masked(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [masked(item, secrets) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return masked(str(value), secrets)


def masked_json(value: Any, secrets: tuple[str, ...]) -> str:
    """``masked(value)`` as JSON text: span attributes hold strings, not structures."""
    return json.dumps(masked(value, secrets), ensure_ascii=False)


def _text(message: BaseMessage, secrets: tuple[str, ...]) -> str:
    text = message.text if isinstance(message.text, str) else str(message.content)
    return str(masked(text, secrets))


def _parts(message: BaseMessage, secrets: tuple[str, ...]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if isinstance(message, ToolMessage):
        result = _text(message, secrets)
        return [{"type": "tool_call_response", "id": message.tool_call_id, "result": result}]
    text = _text(message, secrets)
    if text:
        parts.append({"type": "text", "content": text})
    for call in getattr(message, "tool_calls", None) or []:
        arguments = masked(call.get("args"), secrets)
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": call["name"],
                "arguments": arguments,
            }
        )
    return parts


def messages_json(messages: list[BaseMessage], secrets: tuple[str, ...]) -> str:
    """``gen_ai.input.messages``: the chat history sent, in order (the system prompt included
    as a system message, as the model received it)."""
    shown = [
        {"role": _ROLES.get(m.type, m.type), "parts": _parts(m, secrets)}
        for m in messages
        if isinstance(m, BaseMessage)
    ]
    return json.dumps(shown, ensure_ascii=False)


def output_json(message: BaseMessage, secrets: tuple[str, ...]) -> str:
    """``gen_ai.output.messages``: the one reply, with its finish reason when reported."""
    reply: dict[str, Any] = {"role": "assistant", "parts": _parts(message, secrets)}
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


def record_outcome(span: Span, outputs: Mapping[str, Any]) -> None:
    """The run's status, stop reason and usage; a failure (model or tool) is an error status."""
    status = outputs.get("status") or "paused"  # returned without an end: waiting on a human
    span.set_attribute("gated_react.status", status)
    usage = outputs.get("usage") or {}
    for key in _USAGE:
        if isinstance(usage.get(key), int | float) and not isinstance(usage.get(key), bool):
            span.set_attribute(f"gated_react.usage.{key}", usage[key])
    if usage.get("unpriced"):
        span.set_attribute("gated_react.usage.unpriced", str(usage["unpriced"]))
    reason = outputs.get("stop_reason")
    if not reason:
        return
    span.set_attribute("gated_react.stop_reason", reason)
    if status == "stopped" and _failed(reason):
        span.set_attribute("error.type", reason)
        span.set_status(Status(StatusCode.ERROR, str(outputs.get("message") or reason)[:300]))


_USAGE = ("steps", "tool_calls", "tokens", "input_tokens", "output_tokens", "cached_tokens", "cost")
"""The run's usage figures the invocation span carries (``cost`` in USD, absent if unpriced)."""


def _failed(reason: str) -> bool:
    try:
        return is_failure(reason)
    except ValueError:  # a reason this version does not know: not ours to call a failure
        return False


__all__ = [
    "Labels",
    "masked",
    "masked_json",
    "messages_json",
    "output_json",
    "record_outcome",
    "span_context",
    "traceparent",
]
