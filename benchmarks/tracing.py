"""8. What tracing costs per step, three ways side by side in one run.

- ``untraced``: the graph with its span handler taken off (the nodes' tracing calls still run,
  each returning at once): what a step cost before spans existed, as near as one can get;
- ``api``: the graph as shipped, no SDK installed: the OpenTelemetry API alone, every call a
  no-op (what a library user who configured nothing pays);
- ``sdk``: the SDK installed, every span recorded and handed to a batch processor whose exporter
  encodes each batch as OTLP protobuf and drops it (the export's CPU cost without a network);
  ``force_flush`` runs inside the timing, so the export thread's work is counted.

Whole steps on a loaded 2-core machine vary by several percent, more than the API-alone path
can cost, so that path is also timed alone: the tracing calls one step makes, in a tight loop.

A process installs its tracer provider once, so each measurement runs in a fresh process (after
a warm-up run in it), the modes interleaved, memory checkpointer, LangGraph's default async
durability, the scripted model and the ~1 KB lookup tool of table 1. CPU time of the process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from benchmarks.common import Stat, build, ratio, run_input, timed
from benchmarks.stores import saver

MODES = ("untraced", "api", "sdk")


class _EncodingExporter:
    """An exporter that does the OTLP encoding and sends nothing."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        encode_spans(spans).SerializeToString()
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _install_sdk() -> tuple[Any, _EncodingExporter]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter = _EncodingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))  # type: ignore[arg-type]
    trace.set_tracer_provider(provider)
    return provider, exporter


def helpers_us_per_step(rounds: int = 20_000) -> float:
    """The tracing work one step does with the API alone, in a tight loop: what the nodes call
    (three trace-context checks, the chat, guardrail and tool spans with their results) and the
    handler's per-event question (about a dozen events a step). Microseconds per step."""
    import time

    from gated_react._engine.observability import agent_spans, gate_spans, tracing
    from gated_react._engine.observability.span_content import Labels
    from gated_react.state import Call

    spans, config = agent_spans.AgentSpans(Labels()), {"callbacks": None}
    call = Call(id="c1", tool="lookup", args={"record": 1}, key="k")
    started = time.process_time()
    for _ in range(rounds):
        for _ in range(3):
            agent_spans.carry(spans, None, config)  # type: ignore[arg-type]
        with tracing.chat(spans, config) as span:  # type: ignore[arg-type]
            tracing.replied(spans, span, ([], None), None, None)
        with gate_spans.guardrail(spans, config, "lookup") as span:  # type: ignore[arg-type]
            gate_spans.decided(spans, span, call, frozenset())
        with tracing.tool(spans, config, call) as span:  # type: ignore[arg-type]
            tracing.tool_done(spans, span, "ok")
        for _ in range(12):
            _ = spans.ignore_chain
    return (time.process_time() - started) / rounds * 1e6


def child(mode: str, steps: int, runs: int) -> dict[str, Any]:
    """One process's measurement: a warm-up run, then the median of ``runs`` runs."""
    provider, exporter = _install_sdk() if mode == "sdk" else (None, None)

    def once(n: int) -> tuple[float, float]:
        with saver("memory") as checkpointer:
            graph = build("ours", n, checkpointer)
            if mode == "untraced":  # no run is given the span handler, SDK or not
                graph = graph.copy(update={"spans": None})
            cfg = {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": 100_000}

            def go() -> None:
                graph.invoke(run_input("ours"), cfg)
                if provider is not None:
                    provider.force_flush()

            return timed(go)

    once(5)
    spans_before = exporter.spans if exporter is not None else 0
    cpu = [once(steps)[1] / steps * 1e3 for _ in range(runs)]
    spans = (exporter.spans - spans_before) / runs if exporter is not None else 0
    found = {"cpu_ms_per_step": statistics.median(cpu), "spans_per_step": spans / steps}
    if mode == "api":
        found["helpers_us_per_step"] = helpers_us_per_step()
    return found


def measure(quick: bool) -> dict[str, Any]:
    steps, reps = (20, 1) if quick else (50, 5)
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    spans, helpers = 0.0, []
    for _ in range(reps):
        for mode in MODES:  # interleaved, so load on the machine hits every mode alike
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.tracing", mode, str(steps)],
                capture_output=True,
                text=True,
                check=True,
            )
            found = json.loads(done.stdout)
            cpu[mode].append(found["cpu_ms_per_step"])
            spans = max(spans, found["spans_per_step"])
            helpers += [found["helpers_us_per_step"]] if "helpers_us_per_step" in found else []
    stats = {mode: Stat.of(values) for mode, values in cpu.items()}
    return {
        "steps": steps,
        "processes_per_mode": reps,
        "cpu_ms_per_step": {mode: stat.json() for mode, stat in stats.items()},
        "spans_per_step": round(spans, 2),
        "ratio_api_vs_untraced": ratio(stats["api"].median, stats["untraced"].median),
        "ratio_sdk_vs_api": ratio(stats["sdk"].median, stats["api"].median),
        "sdk_extra_ms_per_step": round(stats["sdk"].median - stats["api"].median, 4),
        "api_helpers_us_per_step": round(statistics.median(helpers), 2),
        "api_helpers_share_of_step": round(
            statistics.median(helpers) / 1e3 / stats["api"].median, 4
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tracing")
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("steps", type=int)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(child(args.mode, args.steps, args.runs)))


if __name__ == "__main__":
    main()
