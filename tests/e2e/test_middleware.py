"""LangChain's own middleware under the gate, end to end, sync and async: model hooks around
decide's call, tool hooks around the calls the gate let through, and whatever a hook makes of a
reply still validated and gated."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelFallbackMiddleware,
    ModelRequest,
    ModelResponse,
    ModelRetryMiddleware,
    PIIMiddleware,
    ToolRetryMiddleware,
    after_model,
    before_model,
    dynamic_prompt,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from gated_react import Policy, build_graph

from ..support.middleware_fakes import Down, FakeToolModel, Flaky, replies
from ..support.results import ainvoked, invoked

RAN: list[str] = []


@tool
def lookup(q: str) -> str:
    """Look a question up."""
    RAN.append(f"lookup:{q}")
    return f"facts about {q}"


@tool
def refund(order: str) -> str:
    """Refund an order (never allowed here)."""
    RAN.append(f"refund:{order}")
    return "refunded"


def run(graph: Any, goal: str, mode: str) -> dict[str, Any]:
    """The run's result as ``gated_react.run`` gives it (with its answer, trace and usage)."""
    RAN.clear()
    if mode == "async":
        return dict(asyncio.run(ainvoked(graph, {"goal": goal})))
    return dict(invoked(graph, {"goal": goal}))


MODES = pytest.mark.parametrize("mode", ["sync", "async"])


class IntoRefund(AgentMiddleware):
    """Rewrites every reply into a call to the denied tool."""

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        handler(request)
        return ModelResponse(result=[AIMessage("", tool_calls=[_refund_call()])])

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        await handler(request)
        return ModelResponse(result=[AIMessage("", tool_calls=[_refund_call()])])


def _refund_call() -> dict[str, Any]:
    return {"name": "refund", "args": {"order": "A1"}, "id": "r1", "type": "tool_call"}


@after_model
def refund_after(state: Any, runtime: Any) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage("", id=last.id, tool_calls=[_refund_call()])]}


@MODES
@pytest.mark.parametrize("rewriter", [IntoRefund(), refund_after], ids=["wrap", "after_model"])
def test_a_reply_rewritten_into_a_denied_call_is_denied_and_the_tool_never_runs(
    mode: str, rewriter: AgentMiddleware
) -> None:
    model = FakeToolModel(messages=replies("All done."))
    policy = Policy(allow={"lookup"})
    graph = build_graph(model, [lookup, refund], policy=policy, middleware=[rewriter])
    out = run(graph, "help", mode)
    assert out["stop_reason"] == "tool_denied:refund"
    assert RAN == []
    assert out["trace"][-1]["tool"] == "refund"


@MODES
@pytest.mark.parametrize("protocol", ["tools", "json"])
def test_dynamic_prompt_follows_the_gates_fixed_rules(mode: str, protocol: str) -> None:
    """The hook's prompt comes after the rules the protocol gives the model (the JSON reply
    format), which it cannot replace; under native tools it is the app's prompt."""

    @dynamic_prompt
    def french(request: ModelRequest) -> str:
        return "Always answer in French."

    said = "Bonjour." if protocol == "tools" else '{"kind": "final", "answer": "Bonjour."}'
    model = FakeToolModel(messages=replies(said))
    policy = Policy(protocol=protocol)  # type: ignore[arg-type]
    out = run(build_graph(model, [lookup], middleware=[french], policy=policy), "greet", mode)
    assert out["answer"] == "Bonjour."
    system = model.seen[0][0]
    assert isinstance(system, SystemMessage)
    assert system.text.endswith("Always answer in French.")
    if protocol == "json":
        assert system.text.startswith("You are the decision step of a ReAct agent.")
        assert system.text.endswith("\n\nInstructions for this agent:\nAlways answer in French.")


@MODES
def test_a_fallback_model_answers_and_its_tokens_are_counted(mode: str) -> None:
    fallback = FakeToolModel(messages=replies("From the fallback."))
    graph = build_graph(Down(), [lookup], middleware=[ModelFallbackMiddleware(fallback)])
    out = run(graph, "question", mode)
    assert (out["stop_reason"], out["answer"]) == ("success", "From the fallback.")
    usage = out["usage"]
    assert (usage["steps"], usage["output_tokens"]) == (2, 5)  # the failed call is a step too
    # the fallback's reported tokens, and the failed call at its estimate (it may have been
    # paid: a failed call is never free)
    assert usage["estimated_tokens"] > 0
    assert usage["input_tokens"] == 11 + usage["estimated_tokens"]


@MODES
def test_model_retry_retries_a_failed_call(mode: str) -> None:
    model = Flaky(messages=replies("Second time lucky."), failures=1)
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
    out = run(build_graph(model, [lookup], middleware=[retry]), "q", mode)
    assert (out["stop_reason"], out["answer"]) == ("success", "Second time lucky.")
    assert model.calls == 2


@MODES
def test_pii_is_redacted_from_the_request_and_the_answer(mode: str) -> None:
    pii = PIIMiddleware("email", strategy="redact", apply_to_output=True)
    model = FakeToolModel(messages=replies("Mail bob@example.com."))
    out = run(build_graph(model, [lookup], middleware=[pii]), "I am ann@example.com", mode)
    assert out["answer"] == "Mail [REDACTED_EMAIL]."
    shown = [m.text for m in model.seen[0] if isinstance(m, HumanMessage)]
    assert shown == ["I am [REDACTED_EMAIL]"]
    assert out["messages"][-1].content == "Mail [REDACTED_EMAIL]."  # the chat never saw it


@MODES
def test_a_middleware_that_raises_is_a_stop_reason(mode: str) -> None:
    block = PIIMiddleware("email", strategy="block")
    model = FakeToolModel(messages=replies("never"))
    out = run(build_graph(model, [lookup], middleware=[block]), "I am ann@example.com", mode)
    assert out["stop_reason"] == "middleware_error:PIIMiddleware[email]"
    assert "before_model raised PIIDetectionError" in out["message"]
    assert model.seen == []


@MODES
def test_a_model_error_through_middleware_is_still_the_models(mode: str) -> None:
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0.0, on_failure="error")
    out = run(build_graph(Down(), [lookup], middleware=[retry]), "q", mode)
    assert out["stop_reason"] == "llm_error:ConnectionError"


class Broken(AgentMiddleware):
    """A cache in front of the model that is offline."""

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        raise RuntimeError("cache offline")

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        raise RuntimeError("cache offline")


@MODES
def test_a_wrap_that_raises_is_named_even_under_another(mode: str) -> None:
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0.0, on_failure="error")
    model = FakeToolModel(messages=replies("never"))
    out = run(build_graph(model, [lookup], middleware=[retry, Broken()]), "q", mode)
    assert out["stop_reason"] == "middleware_error:Broken"
    assert "wrap_model_call raised RuntimeError: cache offline" in out["message"]


@MODES
@pytest.mark.parametrize(
    ("update", "said"),
    [
        ({"calls": []}, "['calls']"),
        (
            {"jump_to": "end", "step": {}},
            "['step']; a hook may change only the messages the model is shown",
        ),
    ],
)
def test_a_hook_may_write_only_the_models_messages(
    mode: str, update: dict[str, Any], said: str
) -> None:
    @before_model(can_jump_to=["end"])
    def meddle(state: Any, runtime: Any) -> dict[str, Any]:
        return update

    model = FakeToolModel(messages=replies("never"))
    out = run(build_graph(model, [lookup], middleware=[meddle]), "q", mode)
    assert out["stop_reason"] == "middleware_error:meddle"
    assert said in out["message"]


FLAKY: list[int] = []


@tool
def flaky_lookup(q: str) -> str:
    """Fails the first time it is called."""
    FLAKY.append(1)
    if len(FLAKY) == 1:
        raise ConnectionError("blip")
    return f"facts about {q}"


@MODES
@pytest.mark.parametrize(
    ("idempotent", "runs", "reason"), [(True, 2, "success"), (False, 1, "tool_error:flaky_lookup")]
)
def test_tool_retry_retries_only_what_may_run_twice(
    mode: str, idempotent: bool, runs: int, reason: str
) -> None:
    FLAKY.clear()
    flaky = flaky_lookup.model_copy(update={"metadata": {"idempotent": idempotent}})
    model = FakeToolModel(messages=replies(_call("flaky_lookup", q="x"), "Done."))
    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
    out = run(build_graph(model, [flaky], middleware=[retry]), "q", mode)
    assert (out["stop_reason"], len(FLAKY)) == (reason, runs)


class Swap(AgentMiddleware):
    """Runs the call with other arguments than the gate let through."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return handler(request.override(tool_call={**request.tool_call, "args": {"q": "other"}}))

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request.override(tool_call={**request.tool_call, "args": {"q": "o"}}))


@MODES
def test_a_tool_hook_that_changes_the_call_is_denied(mode: str) -> None:
    model = FakeToolModel(messages=replies(_call("lookup", q="x"), "Done."))
    policy = Policy(on_tool_error="observe")
    out = run(build_graph(model, [lookup], policy=policy, middleware=[Swap()]), "q", mode)
    assert out["stop_reason"] == "tool_denied:lookup"
    assert "a tool hook changed the call the gate let through" in out["message"]
    assert out["trace"][-1]["stop_reason"] == "tool_denied:lookup"  # audited like a refusal
    assert RAN == []


class Twice(AgentMiddleware):
    """Runs the call, then asks for it again."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        handler(request)
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        await handler(request)
        return await handler(request)


@MODES
def test_a_hook_that_runs_a_call_twice_is_told_it_ran_once(mode: str) -> None:
    """Before: the stop said the call "did not run", though it had run once. Now it says it
    ran once, not twice (the tool is not idempotent)."""
    model = FakeToolModel(messages=replies(_call("lookup", q="x"), "Done."))
    out = run(build_graph(model, [lookup], middleware=[Twice()]), "q", mode)
    assert out["stop_reason"] == "tool_denied:lookup"
    assert out["message"].startswith("lookup ran once, not twice: a tool hook asked")
    assert RAN == ["lookup:x"]


class Watch(AgentMiddleware):
    """Records the calls it sees."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.seen.append(request.tool_call["name"])
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.seen.append(request.tool_call["name"])
        return await handler(request)


@MODES
def test_tool_hooks_see_only_the_calls_the_gate_let_through(mode: str) -> None:
    watch = Watch()
    script = replies(_call("refund", order="A1"), _call("lookup", q="x"), "Done.")
    policy = Policy(allow={"lookup"}, on_tool_error="observe")
    model = FakeToolModel(messages=script)
    graph = build_graph(model, [lookup, refund], policy=policy, middleware=[watch])
    out = run(graph, "q", mode)
    assert out["stop_reason"] == "success"
    assert (watch.seen, RAN) == (["lookup"], ["lookup:x"])


def _call(name: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"c-{name}"}])


class Raising(AgentMiddleware):
    """A tool hook with a bug."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        raise KeyError("oops")

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        raise KeyError("oops")


@MODES
def test_a_tool_hook_that_raises_is_a_failed_call_not_a_traceback(mode: str) -> None:
    model = FakeToolModel(messages=replies(_call("lookup", q="x"), "Done."))
    out = run(build_graph(model, [lookup], middleware=[Raising()]), "q", mode)
    assert out["stop_reason"] == "tool_error:lookup"
    assert "KeyError" in out["message"]
    assert RAN == []


class Friendly(AgentMiddleware):
    """Answers a failed call with an error message of its own words."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return ToolMessage(
            "Lookup is down; try later.", tool_call_id=request.tool_call["id"], status="error"
        )

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return self.wrap_tool_call(request, handler)


@MODES
@pytest.mark.parametrize("on_error", ["stop", "observe"])
def test_a_tool_hooks_error_message_is_a_failed_call_in_its_own_words(
    mode: str, on_error: str
) -> None:
    """Before: the hook's message came back as ``ToolMiddlewareError: ...`` (a tester moving
    a create_agent app); create_agent shows the model the hook's words as they are. An error
    the hook handled is a result, as under create_agent, in either mode: ``on_tool_error``
    is for the failures nobody handled."""
    model = FakeToolModel(messages=replies(_call("lookup", q="x"), "Done."))
    policy = Policy(on_tool_error=on_error)  # type: ignore[arg-type]
    out = run(build_graph(model, [lookup], middleware=[Friendly()], policy=policy), "q", mode)
    (result,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert (result.text, result.status) == ("Lookup is down; try later.", "error")
    assert [(t["ok"], t.get("stop_reason")) for t in out["trace"]] == [(False, None)]
    assert [(h["ok"], h["observation"]) for h in out["history"]] == [
        (False, "Lookup is down; try later.")
    ]
    assert (out["stop_reason"], out["answer"]) == ("success", "Done.")
    assert len(model.seen) == 2  # the model read the hook's words and answered


def test_an_async_only_hook_under_invoke_says_to_use_ainvoke() -> None:
    @before_model
    async def lookahead(state: Any, runtime: Any) -> None:
        return None

    model = FakeToolModel(messages=replies("never"))
    out = run(build_graph(model, [lookup], middleware=[lookahead]), "q", "sync")
    assert out["stop_reason"] == "middleware_error:lookahead"
    assert "has only an async before_model: run the graph with ainvoke" in out["message"]
    assert (
        run(
            build_graph(FakeToolModel(messages=replies("ok")), [], middleware=[lookahead]),
            "q",
            "async",
        )["answer"]
        == "ok"
    )


def test_a_streamed_answer_is_the_one_the_hooks_made() -> None:
    pii = PIIMiddleware("email", strategy="redact", apply_to_output=True)
    model = FakeToolModel(messages=replies("Mail bob@example.com."))
    graph = build_graph(model, [lookup], middleware=[pii])
    chunks = [chunk for chunk, _ in graph.stream({"goal": "q"}, stream_mode="messages")]
    streamed = [chunk.text for chunk in chunks if isinstance(chunk, AIMessage)]
    assert "".join(streamed) == "Mail [REDACTED_EMAIL]."  # never the address, not even a token


def test_an_after_model_hook_that_drops_the_reply_stops_the_run() -> None:
    from langchain_core.messages import RemoveMessage

    @after_model
    def drop(state: Any, runtime: Any) -> dict[str, Any] | None:
        if len(state["messages"]) < 4:  # the second reply, after a past step's AI message
            return None
        return {"messages": [RemoveMessage(id=state["messages"][-1].id)]}

    script = replies(_call("lookup", q="x"), "Done.")
    out = run(build_graph(FakeToolModel(messages=script), [lookup], middleware=[drop]), "q", "sync")
    assert out["stop_reason"] == "middleware_error:drop"
    assert "left no AI reply last" in out["message"]
