"""The spans handler rides a run only while an SDK can record, and from the run after one is
installed."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManager
from langchain_core.runnables.config import ensure_config
from langchain_core.tools import tool

from gated_react import build_graph
from gated_react._engine.observability import traced_graph
from gated_react._engine.observability.agent_spans import AgentSpans
from gated_react._engine.observability.traced_graph import TracedGraph
from gated_react.testing import ScriptedChatModel, call

_BUILT_THEN_INSTALLED = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from gated_react import build_graph
from gated_react.testing import ScriptedChatModel
graph = build_graph(ScriptedChatModel(replies=["one", "two"]), [])
graph.invoke({"goal": "first"})
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
print(len(exporter.get_finished_spans()))
graph.invoke({"goal": "second"})
print(sorted({s.name.split()[0] for s in exporter.get_finished_spans()}))
"""


def test_an_sdk_installed_after_the_build_records_the_next_run() -> None:
    """In a fresh interpreter: a run with the API alone records nothing (no SDK to record
    with); the SDK installed, the same graph's next run records its invocation and its
    model call."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", _BUILT_THEN_INSTALLED],
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["0", "['chat', 'invoke_agent']"]


class _App(BaseCallbackHandler):
    """An application's own handler."""


def _graph(seen: list[list[type]]) -> Any:
    @tool
    def look() -> str:
        """Looks."""
        callbacks = ensure_config().get("callbacks")
        handlers = callbacks.handlers if isinstance(callbacks, CallbackManager) else []
        seen.append([type(h) for h in handlers if type(h) in (AgentSpans, _App)])
        return "seen"

    return build_graph(ScriptedChatModel(replies=[call("look"), "done"]), [look])


@pytest.mark.parametrize("alone", [True, False], ids=["api-alone", "sdk"])
def test_the_handler_rides_a_run_only_while_an_sdk_can_record(
    alone: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[type]] = []
    graph = _graph(seen)
    monkeypatch.setattr(traced_graph, "api_alone", lambda: alone)
    graph.invoke({"goal": "look"}, {"callbacks": [_App()]})
    assert seen == [[_App] if alone else [AgentSpans, _App]]


def test_the_handler_joins_a_parent_runs_manager_and_survives_with_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(traced_graph, "api_alone", lambda: False)
    seen: list[list[type]] = []
    graph = _graph(seen).with_config(tags=["app"])
    assert isinstance(graph, TracedGraph)
    assert isinstance(graph.spans, AgentSpans)
    parent = CallbackManager(handlers=[_App()], inheritable_handlers=[_App()])
    config = graph._traced({"callbacks": parent, "tags": ["x"]})
    assert config is not None
    assert config["tags"] == ["x"]
    assert [type(h) for h in config["callbacks"].handlers] == [_App, AgentSpans]
    assert [type(h) for h in parent.handlers] == [_App]  # the caller's manager is left alone
    graph.invoke({"goal": "look"})
    assert seen == [[AgentSpans]]
