"""The tour (an allowed call, a refused call, an approval pause and resume, a stop) exported
over OTLP to a real Arize Phoenix started for the test, and read back from its REST API: the
span tree, kinds and attributes as the backend holds them."""

from __future__ import annotations

from typing import Any

import pytest

from gated_react import resume, run

from ...support.phoenix import Phoenix
from ...support.spans import APPROVE, TOUR_FIRST, TOUR_SECOND, TOUR_VERDICTS, exported, tour_graph

pytestmark = pytest.mark.phoenix


def _children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[str]:
    span_id = parent["context"]["span_id"]
    return [s["name"] for s in spans if s["parent_id"] == span_id]


def test_phoenix_holds_the_tour_as_two_invocations_of_one_conversation(phoenix: Phoenix) -> None:
    with exported(phoenix.url) as exporter:
        graph = tour_graph()
        assert run(graph, "refund?", thread_id="phoenix-tour")["status"] == "paused"
        assert resume(graph, "phoenix-tour", APPROVE)["stop_reason"] == "loop_detected"
    sent = exporter.get_finished_spans()
    trace_ids = {f"{s.context.trace_id:032x}" for s in sent}
    spans = phoenix.wait_for(len(sent), trace_ids)
    assert len(spans) == len(sent) == 13
    roots = [s for s in spans if s["parent_id"] is None]
    assert [r["name"] for r in roots] == ["invoke_agent gated-react"] * 2
    assert {r["span_kind"] for r in roots} == {"AGENT"}
    first, second = roots
    assert first["attributes"]["gated_react.status"] == "paused"
    assert second["attributes"]["gated_react.stop_reason"] == "loop_detected"
    for root in roots:
        assert root["attributes"]["gen_ai.conversation.id"] == "phoenix-tour"
    assert _children(spans, first) == TOUR_FIRST
    assert _children(spans, second) == TOUR_SECOND
    gate = [s["attributes"] for s in spans if s["name"] == "apply_guardrail gate"]
    verdicts = [(a["gen_ai.tool.name"], a["gen_ai.guardrail.result.value"]) for a in gate]
    assert verdicts == TOUR_VERDICTS
    assert gate[-1]["gated_react.stop_reason"] == "loop_detected"
    assert gate[-1]["gen_ai.guardrail.policy.rule.id"] == "loop_detection"
    kinds = {(s["name"].split()[0], s["span_kind"]) for s in spans if s["parent_id"]}
    assert kinds == {("chat", "LLM"), ("apply_guardrail", "GUARDRAIL"), ("execute_tool", "TOOL")}
