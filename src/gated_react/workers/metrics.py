"""What a worker's runs spent and how they ended, as Prometheus counters, and the store's
backlog read at each scrape.

Each job counts what its run spent while the job ran: the run's result when the job returns,
less what the thread had recorded when the job began (``spent_of`` reads both, the one reading
of a result's shape). A job that fails midway (its store lost, its worker killed) counts
nothing; the job that continues the run counts from what the store then holds. Labels come
from closed sets only (stop reasons without their detail, which may name a tool the model made
up), so no series is added per tool, thread or error text.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gated_react.stops import StopReason, ended_status, parse_stop_reason

LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
"""Seconds: a chat completion takes from a tenth of a second to minutes."""


@dataclass(frozen=True, slots=True)
class Spent:
    """What a thread's run had spent, and whether it had ended, at one moment."""

    stop_reason: str | None = None
    """The stop reason without its detail, once the run ended; else None."""
    tokens: Mapping[str, int] = field(default_factory=dict)
    """Tokens by kind: ``input`` and ``output`` as the model reported them, ``estimated``
    where it reported none (their sum is the run's ``usage.tokens``)."""
    cost: float | None = None
    """US dollars; None while unpriced."""
    tools: Tally[str] = field(default_factory=Tally)
    """Tool calls that reached the gate, by outcome (``tool_outcome``)."""

    def since(self, before: Spent) -> Spent:
        """What was spent between ``before`` and this: all of this when a count went down
        (a new run began on the thread since)."""
        went_down = any(self.tokens.get(k, 0) < v for k, v in before.tokens.items()) or any(
            self.tools[k] < v for k, v in before.tools.items()
        )
        if went_down:
            before = Spent()
        cost = None
        if self.cost is not None:
            cost = max(self.cost - (before.cost or 0.0), 0.0)
        return Spent(
            stop_reason=self.stop_reason if before.stop_reason is None else None,
            tokens={k: v - before.tokens.get(k, 0) for k, v in self.tokens.items()},
            cost=cost,
            tools=self.tools - before.tools,
        )


def spent_of(result: Mapping[str, Any] | None) -> Spent:
    """What a run's result (``run``, ``resume``, ``read``) says it spent: its status and stop
    reason, ``usage``'s tokens and cost, ``trace``'s calls. None (no thread yet): nothing."""
    if not result:
        return Spent()
    usage = result.get("usage") or {}
    estimated = _whole(usage.get("estimated_tokens"))
    tokens = {
        "input": _whole(usage.get("input_tokens")),
        "output": _whole(usage.get("output_tokens")),
        "estimated": estimated,
    }
    cost = usage.get("cost")
    reason = result.get("stop_reason")
    ended = ended_status(result) is not None and isinstance(reason, str)
    return Spent(
        stop_reason=_reason(reason) if ended else None,
        tokens=tokens,
        cost=float(cost) if isinstance(cost, int | float) else None,
        tools=Tally(tool_outcome(entry) for entry in result.get("trace") or () if _a_call(entry)),
    )


def tool_outcome(entry: Mapping[str, Any]) -> str:
    """``ok``, ``answered_by_human`` (a human answered in place of the tool), or why the call
    failed or was refused: a stop reason without its detail (``tool_timeout``, ``tool_denied``)."""
    if entry.get("by_human"):
        return "answered_by_human"
    if entry.get("ok"):
        return "ok"
    return _reason(entry.get("stop_reason") or entry.get("error"))


def _a_call(entry: Any) -> bool:
    """A trace entry of a call (not the record of a budget a human extended)."""
    return isinstance(entry, Mapping) and not entry.get("extended")


def _reason(text: Any) -> str:
    try:
        return str(parse_stop_reason(str(text))[0])
    except ValueError:
        return "error"


def _whole(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and value > 0 else 0


class RunMetrics:
    """The counters of a worker's runs, in its registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.ended = Counter(
            "gated_react_runs_ended",
            "Runs that ended, by stop reason (llm_error: the model failed)",
            ["stop_reason"],
            registry=registry,
        )
        self.tokens = Counter(
            "gated_react_model_tokens",
            "Model tokens the runs spent: input and output as reported, estimated where not",
            ["kind"],
            registry=registry,
        )
        self.cost = Counter(
            "gated_react_model_cost_usd",
            "US dollars the runs' model calls cost (priced calls only)",
            registry=registry,
        )
        self.tool_calls = Counter(
            "gated_react_tool_calls",
            "Tool calls that reached the gate, by outcome",
            ["outcome"],
            registry=registry,
        )
        latency = Histogram(
            "gated_react_model_call_duration_seconds",
            "Seconds each model call took, by outcome (ok or error)",
            ["outcome"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.timer = ModelCallTimer(latency)
        # Series at 0 from the start, so a rate or an alert on them works before the first one.
        for reason in (StopReason.SUCCESS, StopReason.LLM_ERROR, StopReason.LLM_TIMEOUT):
            self.ended.labels(stop_reason=str(reason))
        for outcome in ("ok", "error"):
            latency.labels(outcome=outcome)

    def job_ran(self, before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> None:
        """Count what a job's run spent, from the thread as the job found and left it."""
        grown = spent_of(after).since(spent_of(before))
        if grown.stop_reason is not None:
            self.ended.labels(stop_reason=grown.stop_reason).inc()
        for kind, count in grown.tokens.items():
            if count > 0:
                self.tokens.labels(kind=kind).inc(count)
        if grown.cost:
            self.cost.inc(grown.cost)
        for outcome, count in grown.tools.items():
            self.tool_calls.labels(outcome=outcome).inc(count)


class ModelCallTimer(BaseCallbackHandler):
    """A callback handler that times each model call of the runs it is given to."""

    run_inline = True  # called on the loop that runs the graph, never on an executor thread
    _MOST = 10_000  # calls timed at once; a call that never ends is forgotten past this

    def __init__(self, latency: Histogram) -> None:
        self.latency = latency
        self._started: dict[UUID, float] = {}

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, **_: Any
    ) -> None:
        self._start(run_id)

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: UUID, **_: Any) -> None:
        self._start(run_id)

    def on_llm_end(self, response: Any, *, run_id: UUID, **_: Any) -> None:
        self._ended(run_id, "ok")

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **_: Any) -> None:
        self._ended(run_id, "error")

    def _start(self, run_id: UUID) -> None:
        if len(self._started) >= self._MOST:
            self._started.pop(next(iter(self._started)), None)
        self._started[run_id] = time.monotonic()

    def _ended(self, run_id: UUID, outcome: str) -> None:
        started = self._started.pop(run_id, None)
        if started is not None:
            self.latency.labels(outcome=outcome).observe(time.monotonic() - started)


class StoreBacklog(Collector):
    """The store's backlog, read at each scrape: questions waiting for a human and the queue
    (every worker of a store reports the same numbers: aggregate them with ``max``)."""

    def __init__(self, target: str) -> None:
        self.target = target
        """The Postgres connection string (``StoreURL.target``)."""

    def collect(self) -> Iterator[Metric]:
        from gated_react.records.question_listing import questions_backlog
        from gated_react.records.queue_listing import queue_backlog

        up = GaugeMetricFamily("gated_react_store_up", "1 if this scrape read the store, else 0")
        try:
            waiting, waited = questions_backlog(self.target)
            queued, oldest = queue_backlog(self.target)
        except Exception:  # an unreachable store: the scrape says so and goes on
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield _gauge("gated_react_questions_waiting", "Runs waiting for a human's answer", waiting)
        yield _gauge(
            "gated_react_questions_oldest_age_seconds",
            "Seconds the longest waiting question has waited (0: none waits)",
            waited,
        )
        jobs = GaugeMetricFamily("gated_react_queue_jobs", "Jobs in the queue", labels=["status"])
        for status, count in sorted(queued.items()):
            jobs.add_metric([status], count)
        yield jobs
        yield _gauge(
            "gated_react_queue_oldest_job_age_seconds",
            "Seconds since the oldest job still queued was queued (0: none is)",
            oldest,
        )


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)
