"""The spans of a run, in memory (the SDK's own exporter): one ``invoke_agent`` per invocation,
``chat``, ``execute_tool`` and the gate's ``apply_guardrail`` under it, on every path the nodes
take (sync, async, parallel calls on threads), a resume linked to the run it continues, and
nothing recorded or stored when no SDK records."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from gated_react import (
    Policy,
    aopen_checkpointer,
    aresume,
    arun,
    as_tool,
    build_graph,
    open_checkpointer,
    resume,
    run,
)
from gated_react._engine.model.pricing import Pricer, Tokens, pricer_for
from gated_react.runs import run_book
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ...support.fakes import broken
from ...support.openai_server import FakeOpenAI, Reply
from ...support.spans import (
    APPROVE,
    TOUR_FIRST,
    TOUR_SECOND,
    TOUR_VERDICTS,
    install,
    recorded,
    tour_graph,
    tree,
)


def _by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def _verdicts(spans: tuple[ReadableSpan, ...]) -> list[tuple[str, str, str]]:
    return [
        (
            str(s.attributes["gen_ai.tool.name"]),
            str(s.attributes["gen_ai.guardrail.result.value"]),
            str(s.attributes["gen_ai.guardrail.policy.rule.id"]),
        )
        for s in _by_name(spans, "apply_guardrail gate")
    ]


def _tour(asynchronous: bool) -> tuple[ReadableSpan, ...]:
    with recorded() as exporter:
        graph = tour_graph()
        if asynchronous:
            paused = asyncio.run(arun(graph, "refund?", thread_id="t1"))
            done = asyncio.run(aresume(graph, "t1", APPROVE))
        else:
            paused = run(graph, "refund?", thread_id="t1")
            done = resume(graph, "t1", APPROVE)
    assert (paused["status"], done["stop_reason"]) == ("paused", "loop_detected")
    return exporter.get_finished_spans()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_paused_and_resumed_run_is_two_linked_invocations_with_every_decision(
    asynchronous: bool,
) -> None:
    spans = _tour(asynchronous)
    first, second = _by_name(spans, "invoke_agent gated-react")
    shape = tree(spans)
    assert shape[0] == ["invoke_agent gated-react", "invoke_agent gated-react"]
    assert shape[first.context.span_id] == TOUR_FIRST
    assert shape[second.context.span_id] == TOUR_SECOND
    assert [verdict[:2] for verdict in _verdicts(spans)] == TOUR_VERDICTS
    assert [verdict[2] for verdict in _verdicts(spans)] == [
        "allow",
        "allow",
        "require_approval",
        "require_approval",
        "loop_detection",
    ]
    for span in (first, second):
        assert span.attributes is not None
        assert span.attributes["gen_ai.conversation.id"] == "t1"
        assert span.attributes["gen_ai.agent.name"] == "gated-react"
    assert first.attributes is not None
    assert second.attributes is not None
    assert first.attributes["gated_react.status"] == "paused"
    assert second.attributes["gated_react.status"] == "stopped"
    assert second.attributes["gated_react.stop_reason"] == "loop_detected"
    assert [link.context.span_id for link in second.links] == [first.context.span_id]
    assert second.context.trace_id != first.context.trace_id  # two traces, joined by the link


def test_the_guardrail_result_is_also_an_event_with_the_stop_reason() -> None:
    spans = _tour(asynchronous=False)
    stop = _by_name(spans, "apply_guardrail gate")[-1]
    (event,) = stop.events
    assert event.name == "gen_ai.guardrail.result"
    assert event.attributes is not None
    assert event.attributes["gated_react.stop_reason"] == "loop_detected"
    assert "already called" in str(event.attributes["gen_ai.guardrail.result.reason"])


def test_chat_spans_carry_the_reported_tokens_and_no_content_by_default() -> None:
    spans = _tour(asynchronous=False)
    chat = _by_name(spans, "chat scripted")[0]
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "scripted"  # as Policy.prices names it
    assert int(str(chat.attributes["gen_ai.usage.input_tokens"])) > 0
    assert int(str(chat.attributes["gen_ai.usage.output_tokens"])) > 0
    recorded_keys = {key for span in spans for key in (span.attributes or {})}
    assert not recorded_keys & {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }


def test_content_capture_is_opt_in_and_masks_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    secret = "sk-live1234567890abcdef"
    model = ScriptedChatModel(replies=[call("search_policy", query=f"key {secret}"), "done"])
    with recorded() as exporter:
        run(build_graph(model, SUPPORT_TOOLS), f"refund? my key is {secret}")
    spans = exporter.get_finished_spans()
    (tool,) = _by_name(spans, "execute_tool search_policy")
    chat = _by_name(spans, "chat scripted")[0]
    assert tool.attributes is not None
    assert chat.attributes is not None
    arguments = str(tool.attributes["gen_ai.tool.call.arguments"])
    assert "query" in arguments
    assert "sk-***" in arguments
    assert "gen_ai.tool.call.result" in tool.attributes
    sent = str(chat.attributes["gen_ai.input.messages"])
    assert '"role": "user"' in sent
    assert "refund?" in sent
    assert "search_policy" in str(chat.attributes["gen_ai.output.messages"])
    assert not any(secret in str(value) for s in spans for value in (s.attributes or {}).values())


def test_parallel_calls_on_threads_are_children_of_their_invocation() -> None:
    both = call("get_user_profile", user_id=42)
    both.tool_calls.append({"name": "get_user_billing", "args": {"user_id": 42}, "id": "c2"})
    model = ScriptedChatModel(replies=[both, "done"])
    graph = build_graph(model, SUPPORT_TOOLS, policy=Policy(max_parallel_calls=2))
    with recorded() as exporter:
        run(graph, "refund?")
    spans = exporter.get_finished_spans()
    (root,) = _by_name(spans, "invoke_agent gated-react")
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    assert sorted(s.name for s in tools) == [
        "execute_tool get_user_billing",
        "execute_tool get_user_profile",
    ]
    assert {s.parent.span_id for s in tools if s.parent} == {root.context.span_id}


def test_a_failing_tool_and_a_failing_model_are_error_spans() -> None:
    model = ScriptedChatModel(replies=[call("broken"), RuntimeError("provider down")])
    graph = build_graph(model, [broken], policy=Policy(on_tool_error="observe"))
    with recorded() as exporter:
        out = run(graph, "go")
    assert out["stop_reason"].startswith("llm_error")
    spans = exporter.get_finished_spans()
    (tool,) = _by_name(spans, "execute_tool broken")
    assert tool.attributes is not None
    assert tool.attributes["gated_react.tool.outcome"] == "error"
    assert tool.status.status_code is StatusCode.ERROR
    failed_chat = _by_name(spans, "chat scripted")[-1]
    assert failed_chat.status.status_code is StatusCode.ERROR
    assert str((failed_chat.attributes or {})["error.type"]).startswith("llm_error")
    (root,) = _by_name(spans, "invoke_agent gated-react")
    assert root.status.status_code is StatusCode.ERROR  # a failure, not a policy stop


def test_an_applications_span_is_the_parent_of_the_run() -> None:
    model = ScriptedChatModel(replies=["done"])
    graph = build_graph(model, SUPPORT_TOOLS)
    app = trace.get_tracer("app")
    with recorded() as exporter, app.start_as_current_span("request") as outer:
        graph.invoke({"goal": "hi"}, {"callbacks": []})
    (root,) = _by_name(exporter.get_finished_spans(), "invoke_agent gated-react")
    assert root.parent is not None
    assert root.parent.span_id == outer.get_span_context().span_id


def test_without_a_recording_sdk_no_span_and_no_trace_context_is_stored() -> None:
    install()  # the SDK is there, but its sampler drops every span outside recorded()
    saver = InMemorySaver()
    graph = tour_graph().copy(update={"checkpointer": saver})
    run(graph, "refund?", thread_id="quiet")
    state: dict[str, Any] = graph.get_state({"configurable": {"thread_id": "quiet"}}).values
    assert state.get("traceparent") is None


def test_a_real_clients_chat_span_has_the_reported_tokens_and_the_priced_cost() -> None:
    billing = Reply(tool_calls=[("get_user_billing", {"user_id": 42})], prompt_tokens=2000)
    billing.cached_tokens, billing.completion_tokens = 1536, 40
    script = [billing, Reply(content="USD 49", prompt_tokens=2100, completion_tokens=10)]
    with FakeOpenAI(script) as server, recorded() as exporter:
        model = ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test-0000", base_url=server.base_url)
        out = run(build_graph(model, SUPPORT_TOOLS), "refund?")
    spans = exporter.get_finished_spans()
    first = _by_name(spans, "chat gpt-4.1-mini")[0]
    attributes = dict(first.attributes or {})
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.usage.input_tokens"] == 2000
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 1536
    assert attributes["gen_ai.usage.output_tokens"] == 40
    tokens = Tokens(input=2000, cached=1536, output=40)
    assert attributes["gated_react.usage.cost"] == pytest.approx(_pricer(model).cost(tokens))
    assert out["usage"]["cost"] > attributes["gated_react.usage.cost"]  # two calls paid


def test_the_invocation_span_carries_the_runs_usage() -> None:
    script = [Reply(content="USD 49", prompt_tokens=2100, completion_tokens=10)]
    with FakeOpenAI(script) as server, recorded() as exporter:
        model = ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test-0000", base_url=server.base_url)
        out = run(build_graph(model, SUPPORT_TOOLS), "refund?")
    (root,) = _by_name(exporter.get_finished_spans(), "invoke_agent gated-react")
    attributes = dict(root.attributes or {})
    assert attributes["gated_react.usage.steps"] == out["usage"]["steps"] == 1
    assert attributes["gated_react.usage.cost"] == pytest.approx(out["usage"]["cost"])


def _usage(span: ReadableSpan) -> dict[str, Any]:
    prefix = "gated_react.usage."
    return {k[len(prefix) :]: v for k, v in (span.attributes or {}).items() if k.startswith(prefix)}


def _spent(result: Any) -> dict[str, Any]:
    """A result's usage as the invocation span says it (an unknown cost said by ``unpriced``)."""
    keys = ("steps", "tool_calls", "tokens", "input_tokens", "output_tokens", "cached_tokens")
    said = {key: result["usage"][key] for key in (*keys, "cost", "unpriced")}
    return {key: value for key, value in said.items() if value is not None}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_paused_and_a_stopped_invocation_carry_the_usage_in_the_runs_record(
    tmp_path: Path, asynchronous: bool
) -> None:
    """Through a SQLite store; the async one (aiosqlite) is read only with await, on the loop
    the run ran on."""

    async def atour() -> tuple[Any, Any]:
        async with aopen_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
            graph = tour_graph().copy(update={"checkpointer": saver})
            paused = await arun(graph, "refund?", thread_id="t1")
            return paused, await aresume(graph, "t1", APPROVE)

    with recorded() as exporter:
        if asynchronous:
            paused, done = asyncio.run(atour())
        else:
            with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
                graph = tour_graph().copy(update={"checkpointer": saver})
                paused = run(graph, "refund?", thread_id="t1")
                done = resume(graph, "t1", APPROVE)
    first, second = _by_name(exporter.get_finished_spans(), "invoke_agent gated-react")
    assert (paused["status"], done["stop_reason"]) == ("paused", "loop_detected")
    assert (paused["usage"]["steps"], done["usage"]["steps"]) == (3, 4)
    assert _usage(first) == _spent(paused)
    assert _usage(second) == _spent(done)


def _pricer(model: ChatOpenAI) -> Pricer:
    return pricer_for(model, {})


def test_the_invocation_span_says_what_the_run_ran_under() -> None:
    with recorded() as exporter:
        graph = tour_graph()
        run(graph, "refund?", thread_id="context")
    recorded_at = run_book(graph.checkpointer, "context")
    assert recorded_at.tally.opened is not None  # what the run ran under, in its record
    context = recorded_at.tally.opened.body
    spans = exporter.get_finished_spans()
    (root,) = _by_name(spans, "invoke_agent gated-react")
    attributes = dict(root.attributes or {})
    assert attributes["gated_react.model.class"] == "gated_react.testing.ScriptedChatModel"
    assert attributes["gated_react.model.class"] == context["model_class"]
    assert attributes["gated_react.protocol"] == "tools"
    assert attributes["gen_ai.agent.version"] == context["version"]
    assert json.loads(str(attributes["gated_react.policy"])) == context["policy"]
    assert attributes["gated_react.policy.hash"] == context["policy_hash"]
    gates = _by_name(spans, "apply_guardrail gate")
    assert {(g.attributes or {})["gen_ai.guardrail.policy.id"] for g in gates} == {
        context["policy_hash"]
    }


def test_a_budget_that_asks_is_asked_about_under_its_own_rule() -> None:
    replies = [call("get_user_profile", user_id=42), call("get_user_billing", user_id=42), "ok"]
    policy = Policy(on_budget="ask", budget={"max_tool_calls": 1})
    model = ScriptedChatModel(replies=replies)
    graph = build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=InMemorySaver())
    with recorded() as exporter:
        assert run(graph, "refund?", thread_id="budget")["status"] == "paused"
        assert resume(graph, "budget", APPROVE)["stop_reason"] == "success"
    verdicts = _verdicts(exporter.get_finished_spans())
    assert verdicts == [
        ("get_user_profile", "allowed", "allow"),
        ("get_user_billing", "asked_human", "budget.max_tool_calls"),
        ("get_user_billing", "allowed", "allow"),
    ]


def test_an_agent_called_as_a_tool_nests_its_invocation_under_the_tool_span() -> None:
    inner = build_graph(
        ScriptedChatModel(replies=[call("get_user_profile", user_id=42), "Anna, pro plan"]),
        SUPPORT_TOOLS,
    )
    desk = as_tool(inner, "desk", "Answers questions about one user.")
    outer_model = ScriptedChatModel(replies=[call("desk", goal="Who is user 42?"), "Anna"])
    with recorded() as exporter:
        assert build_graph(outer_model, [desk]).invoke({"goal": "ticket 7"})["status"] == "ok"
    spans = exporter.get_finished_spans()
    outer, inner_root = _by_name(spans, "invoke_agent gated-react")
    (tool,) = _by_name(spans, "execute_tool desk")
    assert outer.parent is None
    assert tool.parent is not None
    assert tool.parent.span_id == outer.context.span_id
    assert inner_root.parent is not None
    assert inner_root.parent.span_id == tool.context.span_id
    (profile,) = _by_name(spans, "execute_tool get_user_profile")
    assert profile.parent is not None
    assert profile.parent.span_id == inner_root.context.span_id


_ALONE_THEN_INSTALLED = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from gated_react._engine.observability.agent_spans import api_alone
before = api_alone()
trace.set_tracer_provider(TracerProvider())
print(before, api_alone())
"""


@pytest.mark.parametrize(
    ("env", "said"),
    [({}, "True False"), ({"OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"}, "False False")],
    ids=["installed-later", "named-by-the-environment"],
)
def test_api_alone_sees_an_sdk_installed_later_or_named_by_the_environment(
    env: dict[str, str], said: str
) -> None:
    """In a fresh interpreter: no SDK, then one installed in code, counts from then on; a
    provider the API's environment variable names counts from the start."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", _ALONE_THEN_INSTALLED],
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == said.split()
