"""Spans keep the promises the state keeps (issue 28): content is the same bounded JSON as an
observation (nesting and cycles bounded, cut to ``Policy.max_observation_chars`` after masking),
building a span never breaks a run, the model's own key is masked wherever its URL is written,
and with content capture off no argument, result or error text reaches a span."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import ReadableSpan

from gated_react import Policy, build_graph, run
from gated_react._engine.observability import tracing
from gated_react.runs import run_book
from gated_react.testing import ScriptedChatModel, call

from ...support.openai_server import FakeOpenAI, reply, tool_call
from ...support.spans import recorded

KEY = "sk-live" + "Q7" * 16
MODEL_KEY = "gr-test-" + "Z9" * 12  # no key-shaped pattern: only the model's own key masks it
CARD = "4111111111111111"
SHOWN: dict[str, Any] = {}


@tool
def fetch() -> Any:
    """Returns whatever the test put in SHOWN["value"]."""
    return SHOWN["value"]


@tool
def charge(card: str) -> str:
    """Charge a card (always declined)."""
    raise ValueError(f"card {card} declined")


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")


def _text(spans: tuple[ReadableSpan, ...]) -> str:
    """Everything the spans say: attributes, status descriptions, events and their attributes."""
    said: list[str] = []
    for span in spans:
        said += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
        said.append(str(span.status.description))
        for event in span.events:
            said += [event.name, *(f"{k}={v}" for k, v in (event.attributes or {}).items())]
    return "\n".join(said)


def _fetched(value: Any, **policy: Any) -> tuple[dict[str, Any], tuple[ReadableSpan, ...]]:
    SHOWN["value"] = value
    model = ScriptedChatModel(replies=[call("fetch"), "done"])
    with recorded() as exporter:
        out = run(build_graph(model, [fetch], policy=Policy(**policy)), "fetch it")
    return out, exporter.get_finished_spans()


def _result(spans: tuple[ReadableSpan, ...]) -> str:
    (span,) = [s for s in spans if s.name == "execute_tool fetch"]
    return str((span.attributes or {})["gen_ai.tool.call.result"])


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.usefixtures("capture")
def test_a_result_nested_5000_deep_or_holding_a_cycle_never_breaks_a_run() -> None:
    """Issue 28: ``span_content.masked`` had no depth or cycle bound; ``run()`` raised
    ``RecursionError`` after the tool ran."""
    cycle: dict[str, Any] = {"name": "loop"}
    cycle["self"] = cycle
    for value in (_nested(5000), cycle):
        out, spans = _fetched(value)
        assert out["stop_reason"] == "success"
        assert len(_result(spans)) <= 4100


@pytest.mark.usefixtures("capture")
def test_a_failing_span_is_counted_and_the_run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(*args: Any) -> str:
        raise RuntimeError("exporter bug")

    monkeypatch.setattr(tracing, "masked_json", fails)
    before = sum(tracing.SPAN_FAILURES.values())
    out, _ = _fetched("fine")
    assert out["stop_reason"] == "success"
    assert sum(tracing.SPAN_FAILURES.values()) > before


@pytest.mark.usefixtures("capture")
@pytest.mark.parametrize("limit", [4000, 8000])
def test_a_secret_straddling_the_cut_is_masked_before_the_cut(limit: int) -> None:
    """Issue 28: a result ``"x" * 7990 + KEY`` (the model's own key) put the key's first 10
    characters into the span: the text was cut at 8,000 characters, then masked."""
    for value in ("x" * 7990 + MODEL_KEY, "x" * (limit - 10) + MODEL_KEY):
        SHOWN["value"] = value
        with FakeOpenAI([tool_call("fetch"), reply("done")]) as server, recorded() as exporter:
            model = ChatOpenAI(model="gpt-4.1-mini", api_key=MODEL_KEY, base_url=server.base_url)
            graph = build_graph(model, [fetch], policy=Policy(max_observation_chars=limit))
            assert graph.invoke({"goal": "fetch it"})["stop_reason"] == "success"
        said = _text(exporter.get_finished_spans())
        assert "gen_ai.tool.call.result" in said
        assert MODEL_KEY[:10] not in said


@pytest.mark.usefixtures("capture")
def test_a_huge_result_is_bounded_like_the_observation() -> None:
    """Issue 28: a 150,000-item result became a 2.1 MB span attribute; the state kept 4,000
    characters."""
    out, spans = _fetched(list(range(150_000)))
    result = _result(spans)
    assert len(result) <= 4000 + 60
    assert result.startswith("[0, 1, 2")
    assert "cut: " in result
    assert len(str(out["history"][-1]["observation"])) <= 4000 + 60


@pytest.mark.parametrize("content", [False, True], ids=["capture off", "capture on"])
def test_a_key_in_the_base_urls_userinfo_is_masked_in_run_context_and_every_span(
    monkeypatch: pytest.MonkeyPatch, content: bool
) -> None:
    """Issue 28: ``ChatOpenAI(api_key=K, base_url="http://K@127.0.0.1:port/v1")`` put K into
    ``run_context`` and the ``invoke_agent`` span, capture off."""
    if content:
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    cfg: Any = {"configurable": {"thread_id": "t"}}
    with FakeOpenAI([reply("done")]) as server, recorded() as exporter:
        url = server.base_url.replace("http://", f"http://{MODEL_KEY}@")
        model = ChatOpenAI(model="gpt-4.1-mini", api_key=MODEL_KEY, base_url=url)
        graph = build_graph(model, [fetch], checkpointer=InMemorySaver())
        out = graph.invoke({"goal": "hi"}, cfg)
    assert out["stop_reason"] == "success"
    opened = run_book(graph.checkpointer, "t").tally.opened
    assert opened is not None
    context = opened.body  # what the run ran under, in its record
    assert context["base_url"].startswith("http://***@127.0.0.1:")
    said = _text(exporter.get_finished_spans())
    assert MODEL_KEY[8:] not in said
    assert "gated_react.model.base_url=http://***@127.0.0.1:" in said


def test_the_run_context_masks_the_models_own_key_in_its_url() -> None:
    from gated_react._engine.model.pricing import pricer_for
    from gated_react._engine.run_context import run_context

    model = ChatOpenAI(
        model="gpt-4.1-mini", api_key=MODEL_KEY, base_url=f"http://{MODEL_KEY}@127.0.0.1:9/v1"
    )
    context = run_context(model, Policy(), pricer_for(model, {}))
    assert context.base_url == "http://***@127.0.0.1:9/v1"


@pytest.mark.parametrize("where", ["stop", "observe"])
def test_with_capture_off_no_argument_or_error_text_reaches_a_span(where: str) -> None:
    """Issue 28: a tool raising ``f"card {number} declined"`` put the number into the
    ``execute_tool`` and ``invoke_agent`` span status, capture off."""
    model = ScriptedChatModel(replies=[call("charge", card=CARD), "sorry"])
    graph = build_graph(model, [charge], policy=Policy(on_tool_error=where))  # type: ignore[arg-type]
    with recorded() as exporter:
        out = run(graph, f"charge card {CARD}")
    assert CARD in out["message"] or CARD in str(out["history"])  # the state keeps it
    spans = exporter.get_finished_spans()
    said = _text(spans)
    assert CARD not in said
    assert "declined" not in said
    (tool_span,) = [s for s in spans if s.name == "execute_tool charge"]
    assert tool_span.status.description == "ValueError"
