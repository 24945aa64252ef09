"""LangChain's call-limit middlewares taken as budgets: a program built for ``create_agent``
with ``ToolCallLimitMiddleware`` / ``ModelCallLimitMiddleware`` builds here, its calls are held
to the same limits by the gate, and a limit that lets the run go on reads as it read there."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware, ToolCallLimitMiddleware
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import MiddlewareRefused, Policy, build_graph
from gated_react.policy import Budget

from ...support.helpers import node_deps
from ...support.middleware_fakes import FakeToolModel, replies


@tool
def search(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    return f"page {url}"


def _calls(*names: str) -> list[AIMessage]:
    return [
        AIMessage("", tool_calls=[{"name": n, "args": _args(n, i), "id": f"c{i}"}])
        for i, n in enumerate(names)
    ]


def _args(name: str, i: int) -> dict[str, Any]:
    return {"query": f"q{i}"} if name == "search" else {"url": f"u{i}"}


def _run(agent: Any, graph: Any = None) -> list[BaseMessage]:
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    result = agent.invoke({"messages": [{"role": "user", "content": "find it"}]}, config)
    return list(result["messages"])


def _seen(messages: list[BaseMessage]) -> list[tuple[str, Any, str | None]]:
    """What a program prints of a run: each message's type, text, and a result's status."""
    return [(m.type, m.text, getattr(m, "status", None)) for m in messages]


def _both(middleware: Any, script: list[AIMessage]) -> tuple[list[Any], list[Any]]:
    theirs = create_agent(
        FakeToolModel(messages=replies(*script)),
        [search, fetch],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    ours = build_graph(
        FakeToolModel(messages=replies(*script)),
        [search, fetch],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    return _seen(_run(theirs)), _seen(_run(ours))


def test_a_tool_limit_that_continues_tells_the_model_as_create_agent_does() -> None:
    """Before, the middleware was refused: the program did not build."""
    script = [*_calls("search", "search", "search"), AIMessage("two searches were enough")]
    limit = ToolCallLimitMiddleware(tool_name="search", run_limit=2)
    theirs, ours = _both(limit, script)
    blocked = ("tool", "Tool call limit exceeded. Do not call 'search' again.", "error")
    assert blocked in theirs
    assert ours == theirs


def test_a_limit_on_every_tool_tells_the_model_to_make_no_more_calls() -> None:
    script = [*_calls("search", "fetch"), AIMessage("one call it is")]
    theirs, ours = _both(ToolCallLimitMiddleware(run_limit=1), script)
    assert ("tool", "Tool call limit exceeded. Do not make additional tool calls.", "error") in ours
    assert ours == theirs


def test_a_tool_limit_that_ends_stops_the_run_on_the_budget() -> None:
    limit = ToolCallLimitMiddleware(tool_name="search", run_limit=1, exit_behavior="end")
    graph = build_graph(
        FakeToolModel(messages=replies(*_calls("search", "search"), "x")),
        [search, fetch],
        middleware=[limit],
    )
    result = graph.invoke({"goal": "find it"})
    assert (result["status"], result["stop_reason"]) == ("stopped", "tool_limit:search")
    ran, refused = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert (ran.text, refused.status) == ("results for q0", "error")
    assert refused.text.startswith("not run: the run stopped (tool_limit:search)")


def test_a_model_limit_is_the_runs_step_budget() -> None:
    graph = build_graph(
        FakeToolModel(messages=replies(*_calls("search", "search", "search"), "x")),
        [search, fetch],
        middleware=[ModelCallLimitMiddleware(run_limit=2, exit_behavior="error")],
    )
    result = graph.invoke({"goal": "find it"})  # a stop, never ModelCallLimitExceededError
    assert (result["status"], result["stop_reason"]) == ("stopped", "max_steps")
    assert "max_steps 2 reached" in result["message"]


@pytest.mark.parametrize(
    ("policy", "middleware", "expected"),
    [
        (Policy(), [ToolCallLimitMiddleware(run_limit=3)], (8, 3, {}, "observe")),
        (
            Policy(budget=Budget(max_tool_calls=1)),
            [ToolCallLimitMiddleware(run_limit=3)],
            (8, 1, {}, "observe"),
        ),
        (
            Policy(budget=Budget(tool_limits={"search": 1})),
            [
                ToolCallLimitMiddleware(tool_name="search", run_limit=4, exit_behavior="end"),
                ToolCallLimitMiddleware(tool_name="fetch", run_limit=2, exit_behavior="error"),
            ],
            (8, 6, {"search": 1, "fetch": 2}, "stop"),
        ),
        (
            Policy(budget=Budget(max_steps=3)),
            [ModelCallLimitMiddleware(run_limit=5)],
            (3, 6, {}, "stop"),
        ),
        (Policy(), [ModelCallLimitMiddleware(run_limit=5)], (5, 6, {}, "stop")),
    ],
)
def test_the_tighter_of_the_policy_and_the_middleware_holds(
    policy: Policy, middleware: list[Any], expected: tuple[Any, ...]
) -> None:
    got = node_deps(FakeToolModel(messages=replies("x")), [search, fetch], policy, middleware)
    budget = got.policy.budget
    assert (
        budget.max_steps,
        budget.max_tool_calls,
        budget.tool_limits,
        got.policy.on_tool_limit,
    ) == expected


@pytest.mark.parametrize(
    ("middleware", "said"),
    [
        ([ToolCallLimitMiddleware(thread_limit=5)], "thread_limit=5 has no equivalent here"),
        ([ModelCallLimitMiddleware(thread_limit=3, run_limit=2)], "thread_limit=3 has no"),
        ([ModelCallLimitMiddleware(run_limit=0)], "run_limit=0 lets the model make no call"),
        (
            [
                ToolCallLimitMiddleware(tool_name="search", run_limit=1),
                ToolCallLimitMiddleware(tool_name="fetch", run_limit=1, exit_behavior="end"),
            ],
            "give them the same exit_behavior",
        ),
    ],
)
def test_what_a_budget_cannot_hold_is_refused_in_one_line(middleware: list[Any], said: str) -> None:
    with pytest.raises(MiddlewareRefused) as caught:
        build_graph(FakeToolModel(messages=replies("x")), [search, fetch], middleware=middleware)
    message = str(caught.value)
    assert "\n" not in message
    assert said in message
    assert message.startswith(f"{type(middleware[-1]).__name__} is not taken: ")


def test_a_limit_on_a_tool_that_does_not_exist_is_refused() -> None:
    """create_agent would never match it, and the limit would hold nothing."""
    with pytest.raises(ValueError, match="sarch"):
        build_graph(
            FakeToolModel(messages=replies("x")),
            [search],
            middleware=[ToolCallLimitMiddleware(tool_name="sarch", run_limit=1)],
        )


def test_observe_without_middleware_answers_the_call_over_the_limit() -> None:
    policy = Policy(budget=Budget(tool_limits={"search": 1}), on_tool_limit="observe")
    script = [*_calls("search", "search"), AIMessage("done")]
    graph = build_graph(FakeToolModel(messages=replies(*script)), [search, fetch], policy=policy)
    result = graph.invoke({"goal": "find it"})
    assert (result["stop_reason"], result["messages"][-1].text) == ("success", "done")
    results = [(m.text, m.status) for m in result["messages"] if isinstance(m, ToolMessage)]
    assert results == [
        ("results for q0", "success"),
        ("Tool call limit exceeded. Do not call 'search' again.", "error"),
    ]
