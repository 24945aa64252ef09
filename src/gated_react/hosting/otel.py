"""Tracing for the processes this package hosts: the CLI, the workers and the graphs
``langgraph.json`` names install the OpenTelemetry SDK with an OTLP exporter here, from the
standard ``OTEL_*`` variables (read in ``settings.py``). Needs the ``otel`` extra.

A library must not do this on import: an application that embeds the graph installs its own
SDK (or none, and every span stays the API's no-op).
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gated_react.settings import Settings

_LOG = logging.getLogger("gated_react.hosting.otel")
_LOCK = threading.Lock()
_DONE: list[bool] = []
"""Set once this process has decided (configured or not): the factories run once per run."""


def setup_tracing(settings: Settings) -> bool:
    """Install a tracer provider exporting as the settings say, once per process. False (and
    nothing changed) when they ask for no export, when the application already installed a
    provider, or when the otel extra is missing (one warning line, never an error)."""
    with _LOCK:
        if _DONE:
            return _DONE[0]
        configured = _install(settings)
        _DONE.append(configured)
        return configured


def _install(settings: Settings) -> bool:
    kind = settings.tracing_exporter()
    if kind is None:
        return False
    from opentelemetry import trace

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False  # the application configured its own: its choice stands
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        exporter = _exporter(settings, kind)
    except ImportError as exc:
        _LOG.warning(
            "gated-react: OpenTelemetry export is configured but %s is not installed; "
            "tracing is off (pip install 'gated-react[otel]')",
            exc.name or "the otel extra",
        )
        return False
    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.otel_service_name})
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True


def _exporter(settings: Settings, kind: str) -> Any:
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        # Spans are diagnostics: stdout is a command's result (``gated-react run --json``
        # prints exactly the result object there) or a worker's JSON log lines.
        return ConsoleSpanExporter(out=sys.stderr)
    endpoint = settings.otel_endpoint
    if settings.otel_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HTTPSpanExporter,
    )

    # The variable names the collector; over HTTP the traces path goes after it (as the SDK
    # does when it reads the variable itself).
    url = f"{endpoint.rstrip('/')}/v1/traces" if endpoint else None
    return HTTPSpanExporter(endpoint=url)


__all__ = ["setup_tracing"]
