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


def _calls(*names: str, first: int = 0) -> list[AIMessage]:
    return [
        AIMessage("", tool_calls=[{"name": n, "args": _args(n, i), "id": f"c{i}"}])
        for i, n in enumerate(names, start=first)
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
        # a default gives way (create_agent has none): before, 10 was cut to the default 6
        (Policy(), [ToolCallLimitMiddleware(run_limit=10)], (8, 10, {}, "observe")),
        (Policy(), [ModelCallLimitMiddleware(run_limit=30)], (30, 6, {}, "stop")),
        (Policy(on_tool_limit="stop"), [ToolCallLimitMiddleware(run_limit=3)], (8, 3, {}, "stop")),
        (
            Policy(),
            [ToolCallLimitMiddleware(tool_name="search", run_limit=-1)],
            (8, 6, {"search": 0}, {"search": "observe"}),
        ),
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
        ([ModelCallLimitMiddleware(thread_limit=0)], "thread_limit=0 lets the model make no"),
        ([ModelCallLimitMiddleware(run_limit=0)], "run_limit=0 lets the model make no call"),
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


def _turns(make: Any, middleware: Any, script: list[AIMessage], checkpointer: Any) -> list[Any]:
    """Two questions on one thread: what each run's messages show."""
    agent = make(FakeToolModel(messages=replies(*script)), [search, fetch],
                 middleware=[middleware], checkpointer=checkpointer)  # fmt: skip
    config = {"configurable": {"thread_id": "t"}}
    shown = []
    for question in ("find it", "and again"):
        result = agent.invoke({"messages": [{"role": "user", "content": question}]}, config)
        shown.append(_seen(list(result["messages"])))
    return shown


def test_thread_limits_are_the_budgets_thread_twins() -> None:
    stack = [
        ModelCallLimitMiddleware(thread_limit=10, run_limit=5),
        ToolCallLimitMiddleware(thread_limit=4),
        ToolCallLimitMiddleware(tool_name="search", thread_limit=2, run_limit=1),
    ]
    budget = node_deps(FakeToolModel(messages=replies("x")), [search, fetch], Policy(), stack)
    held = budget.policy.budget
    assert (held.max_steps, held.thread_max_steps, held.max_tool_calls) == (5, 10, 6)
    assert (held.thread_max_tool_calls, held.thread_tool_limits) == (4, {"search": 2})
    assert held.tool_limits == {"search": 1}
    assert held.per_thread(tools=True)
    assert held.per_thread(tools=False)
    assert not Policy().budget.per_thread(tools=True)
    assert not Policy().budget.per_thread(tools=False)


def test_the_threads_record_is_read_only_where_its_limit_is_checked() -> None:
    """A thread's model-call limit alone: the gate and execute read no thread's record (two
    reads a step before), each model call does; a tool limit the other way round."""
    from gated_react._engine.authority import backends

    reads: list[str | None] = []
    after = backends.MemoryBackend.after

    def spied(self: Any, thread: str, run: str | None, seq: int) -> Any:
        reads.append("thread" if run is None else "run")
        return after(self, thread, run, seq)

    for limit, expected in ((ModelCallLimitMiddleware(thread_limit=9), 3),
                            (ToolCallLimitMiddleware(thread_limit=9), 4)):  # fmt: skip
        reads.clear()
        backends.MemoryBackend.after = spied  # type: ignore[method-assign]
        try:
            model = FakeToolModel(messages=replies(*_calls("search", "fetch"), "x"))
            graph = build_graph(model, [search, fetch], middleware=[limit],
                                checkpointer=InMemorySaver())  # fmt: skip
            graph.invoke({"goal": "go"}, {"configurable": {"thread_id": "t"}})
        finally:
            backends.MemoryBackend.after = after  # type: ignore[method-assign]
        assert reads.count("thread") == expected  # 3 model calls; or 2 calls, gate and execute


def test_a_thread_limit_counts_every_run_on_the_thread_as_create_agent_does() -> None:
    """Before, ``thread_limit`` was refused: the program did not build."""
    script = [*_calls("search"), AIMessage("one"), *_calls("search", "search", first=1), "two"]
    limit = ToolCallLimitMiddleware(tool_name="search", thread_limit=2)
    theirs = _turns(create_agent, limit, script, InMemorySaver())
    ours = _turns(build_graph, limit, script, InMemorySaver())
    blocked = ("tool", "Tool call limit exceeded. Do not call 'search' again.", "error")
    assert blocked in theirs[1]
    assert blocked not in theirs[0]
    assert ours == theirs


def test_a_thread_limit_holds_for_a_new_process_reading_the_same_store(tmp_path: Any) -> None:
    """The count is the thread's record in the database, not a channel or this process's
    memory: a second saver on the file (a restarted process) reads the first run's calls."""
    from gated_react import open_checkpointer

    url = str(tmp_path / "runs.sqlite")
    limit = ModelCallLimitMiddleware(thread_limit=3)
    config = {"configurable": {"thread_id": "t"}}
    for question, script in (
        ("one", [*_calls("search"), "first"]),
        ("two", [*_calls("search", "fetch", first=1), "x"]),
    ):
        with open_checkpointer(url) as saver:
            model = FakeToolModel(messages=replies(*script))
            graph = build_graph(model, [search, fetch], middleware=[limit], checkpointer=saver)
            result = graph.invoke({"goal": question}, config)
    assert len(model.seen) == 1  # 2 calls in the first run, 1 left for the second
    assert (result["status"], result["stop_reason"]) == ("stopped", "max_steps")
    assert "thread_max_steps 3 reached (4 requested across the thread's runs)" in result["message"]


def test_a_thread_limit_is_never_extended_by_a_human() -> None:
    policy = Policy(on_budget="ask", budget=Budget(thread_max_tool_calls=1))
    graph = build_graph(FakeToolModel(messages=replies(*_calls("search", "fetch"), "x")),
                        [search, fetch], policy=policy, checkpointer=InMemorySaver())  # fmt: skip
    result = graph.invoke({"goal": "find it"}, {"configurable": {"thread_id": "t"}})
    assert "__interrupt__" not in result
    assert (result["stop_reason"], result["message"].count("thread_max_tool_calls 1")) == (
        "max_tool_calls",
        1,
    )


def test_each_limit_keeps_its_own_exit_behaviour() -> None:
    """Before, a global limit that continues beside a tool's that ends was refused."""
    stack = [
        ToolCallLimitMiddleware(run_limit=2),
        ToolCallLimitMiddleware(tool_name="search", run_limit=1, exit_behavior="end"),
    ]
    policy = node_deps(FakeToolModel(messages=replies("x")), [search, fetch], Policy(), stack)
    assert policy.policy.on_tool_limit == {"*": "observe", "search": "stop"}

    def run(*script: Any) -> dict[str, Any]:
        model = FakeToolModel(messages=replies(*script))
        return build_graph(model, [search, fetch], middleware=stack).invoke({"goal": "go"})

    fetched = run(*_calls("fetch", "fetch", "fetch"), "fetched")  # the global one continues
    assert [m.text for m in fetched["messages"] if isinstance(m, ToolMessage)][2] == (
        "Tool call limit exceeded. Do not make additional tool calls."
    )
    assert (fetched["stop_reason"], fetched["messages"][-1].text) == ("success", "fetched")
    searched = run(*_calls("search", "search"), "searched")  # the search one ends the run
    assert (searched["status"], searched["stop_reason"]) == ("stopped", "tool_limit:search")
