"""The middleware engine's parts: LangChain's composers as we rely on them, what the budgets
are charged for, where the hooks see the run's runtime, and a graph without middleware
unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.factory import _chain_model_call_handlers, _chain_tool_call_wrappers
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
    PIIMiddleware,
    ToolRetryMiddleware,
    dynamic_prompt,
)
from langchain_core.messages import AIMessage

from gated_react import Policy, build_graph
from gated_react._engine.compat.middleware_model import paid
from gated_react._engine.deps import NodeDeps

from ...support.helpers import node_deps
from ...support.middleware_fakes import USAGE, FakeToolModel, replies
from ...support.results import invoked


def test_langchains_composer_puts_the_first_outermost() -> None:
    """What ``create_agent`` does and ``Middleware.call_model`` relies on (pinned: private)."""
    order: list[str] = []

    def layer(name: str) -> Any:
        def wrap(request: Any, handler: Any) -> Any:
            order.append(f"{name} in")
            response = handler(request)
            order.append(f"{name} out")
            return response

        return wrap

    chain = _chain_model_call_handlers([layer("a"), layer("b")])
    assert chain is not None
    result = chain("request", lambda request: ModelResponse(result=[AIMessage(request)]))
    assert result.model_response.result[0].content == "request"
    assert order == ["a in", "b in", "b out", "a out"]
    tools = _chain_tool_call_wrappers([lambda r, h: h(r) + "a", lambda r, h: h(r) + "b"])
    assert tools is not None
    assert tools("x", lambda r: r) == "xba"


def _reply(usage: dict[str, int] | None = None) -> AIMessage:
    return AIMessage("hi", usage_metadata=usage)  # type: ignore[arg-type]


def test_what_the_budgets_are_charged_for() -> None:
    rewritten = AIMessage("rewritten")
    one = _reply(dict(USAGE))  # type: ignore[arg-type]
    assert paid([one], rewritten) is one  # the model's reply, not what a hook made of it
    free = paid([], rewritten).usage_metadata  # type: ignore[attr-defined]
    assert free == {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    both = paid([one, _reply(dict(USAGE))], rewritten)  # type: ignore[arg-type]
    assert both.usage_metadata["total_tokens"] == 32  # type: ignore[attr-defined]
    assert paid([one, _reply()], rewritten).usage_metadata is None  # type: ignore[attr-defined]


class Rewrite(AgentMiddleware):
    def wrap_model_call(self, request: ModelRequest, handler: Any) -> AIMessage:
        handler(request)
        return AIMessage("rewritten, with no token counts")


def test_a_rewritten_reply_costs_what_the_model_spent() -> None:
    graph = build_graph(FakeToolModel(messages=replies("hi")), [], middleware=[Rewrite()])
    out = invoked(graph, {"goal": "q"})
    assert out["answer"] == "rewritten, with no token counts"
    assert (out["usage"]["input_tokens"], out["usage"]["output_tokens"]) == (11, 5)
    assert "reported no usable token counts" not in (out["usage"]["unpriced"] or "")


def test_a_hook_reads_the_runs_context_from_its_runtime() -> None:
    @dynamic_prompt
    def for_user(request: ModelRequest) -> str:
        return f"The user is {request.runtime.context['user']}."

    model = FakeToolModel(messages=replies("ok"))
    build_graph(model, [], middleware=[for_user]).invoke({"goal": "hi"}, context={"user": "Ann"})
    assert model.seen[0][0].text.endswith("The user is Ann.")


def _deps(middleware: list[Any]) -> NodeDeps:
    return node_deps(FakeToolModel(messages=replies("hi")), [], Policy(), middleware)


@pytest.mark.parametrize(
    ("middleware", "streams"),
    [([], True), ([ToolRetryMiddleware()], True), ([PIIMiddleware("email")], False)],
    ids=["none", "tool hooks only", "model hooks"],
)
def test_an_answer_streams_unless_model_hooks_may_change_it(
    middleware: list[Any], streams: bool
) -> None:
    assert _deps(middleware).answer_streams is streams


def test_without_middleware_nodes_run_the_code_they_ran_before() -> None:
    assert _deps([]).middleware is None
