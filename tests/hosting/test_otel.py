"""The SDK set-up the CLI, the workers and the Studio graphs share, each case in a fresh
process (a process installs its tracer provider once): export from the OTEL_* variables, nothing
without them or when disabled, and one warning line, not a crash, without the otel extra."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ..support.reaping import PATIENCE

_RUN = """
import sys
{before}
from opentelemetry import trace
from gated_react import build_graph, run
from gated_react.hosting.otel import setup_tracing
from gated_react.settings import Settings
from gated_react.testing import ScriptedChatModel
print("configured", setup_tracing(Settings()), setup_tracing(Settings()), file=sys.stderr)
print("provider", type(trace.get_tracer_provider()).__name__, file=sys.stderr)
run(build_graph(ScriptedChatModel(replies=["done"]), []), "hi", thread_id="otel-thread")
"""
_OTEL = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
)


def _run(before: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in _OTEL}
    return subprocess.run(
        [sys.executable, "-c", _RUN.format(before=before)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=True,
    )


def test_the_console_exporter_prints_the_runs_span_with_the_service_name() -> None:
    out = _run(OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="refunds")
    assert "configured True True" in out.stderr
    assert '"name": "invoke_agent gated-react"' in out.stderr  # never on stdout: a result's
    assert '"service.name": "refunds"' in out.stderr
    assert '"gen_ai.conversation.id": "otel-thread"' in out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},
        {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"},
    ],
    ids=["nothing set", "exporter none", "sdk disabled"],
)
def test_nothing_is_installed_unless_the_variables_ask(env: dict[str, str]) -> None:
    out = _run(**env)
    assert "configured False False" in out.stderr
    assert "provider ProxyTracerProvider" in out.stderr
    assert out.stdout == ""


def test_without_the_otel_extra_one_warning_line_and_the_run_goes_on() -> None:
    hide = "sys.modules['opentelemetry.sdk'] = None"
    out = _run(before=hide, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert "configured False False" in out.stderr
    warnings = [line for line in out.stderr.splitlines() if "gated-react[otel]" in line]
    assert len(warnings) == 1, out.stderr
    assert "Traceback" not in out.stderr
