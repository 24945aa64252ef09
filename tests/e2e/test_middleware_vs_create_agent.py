"""The same middleware programs on LangChain's ``create_agent`` and on ``build_graph``: the same
answer, the same tool runs, the same prompt, sync and async. Only the constructor differs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelFallbackMiddleware,
    ModelRequest,
    ModelResponse,
    PIIMiddleware,
    ToolRetryMiddleware,
    after_model,
    before_model,
    dynamic_prompt,
    hook_config,
)
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from gated_react import Policy, build_graph

from ..support.middleware_fakes import Down, FakeToolModel, replies

RAN: list[str] = []


@tool
def lookup(q: str) -> str:
    """Look a question up."""
    RAN.append(q)
    if RAN.count(q) == 1 and q == "flaky":
        raise ConnectionError("blip")
    return f"facts about {q}"


IDEMPOTENT_LOOKUP = lookup.model_copy(update={"metadata": {"idempotent": True}})


def _call(q: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": q}, "id": f"c-{q}"}])


@dynamic_prompt
def by_user(request: ModelRequest) -> str:
    return "You help the user named in the context." if request.runtime else "No runtime."


class Shout(AgentMiddleware):
    """Rewrites every text reply in capitals."""

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        return self._shout(handler(request))

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> ModelResponse:
        return self._shout(await handler(request))

    def _shout(self, response: ModelResponse) -> ModelResponse:
        reply = response.result[-1]
        loud = reply.model_copy(update={"content": reply.text.upper()}) if reply.text else reply
        return ModelResponse(result=[loud])


Program = tuple[Callable[[], Any], Callable[[], list[AgentMiddleware]], str]
PROGRAMS: dict[str, Program] = {
    "dynamic prompt, PII on the answer": (
        lambda: FakeToolModel(messages=replies(_call("x"), "Write to bob@example.com.")),
        lambda: [by_user, PIIMiddleware("email", strategy="redact", apply_to_output=True)],
        "Write to [REDACTED_EMAIL].",
    ),
    "fallback model, tool retry": (
        Down,
        lambda: [
            ModelFallbackMiddleware(
                FakeToolModel(messages=replies(_call("flaky"), "Looked it up."))
            ),
            ToolRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False),
        ],
        "Looked it up.",
    ),
    "a rewritten reply": (
        lambda: FakeToolModel(messages=replies(_call("y"), "quiet answer")),
        lambda: [Shout()],
        "QUIET ANSWER",
    ),
}


def _langchain(model: Any, tools: list[BaseTool], middleware: list[AgentMiddleware]) -> Any:
    return create_agent(model, tools, middleware=middleware)


def _ours(model: Any, tools: list[BaseTool], middleware: list[AgentMiddleware]) -> Any:
    return build_graph(model, tools, policy=Policy(), middleware=middleware)


def seen_by_user(build: Callable[..., Any], program: Program, mode: str) -> dict[str, Any]:
    make_model, make_middleware, _ = program
    RAN.clear()
    model = make_model()
    app = build(model, [IDEMPOTENT_LOOKUP], make_middleware())
    given = {"messages": [HumanMessage("Please look it up.")]}
    out = asyncio.run(app.ainvoke(given)) if mode == "async" else app.invoke(given)
    return {"answer": out["messages"][-1].content, "tools ran": list(RAN)}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_user_sees_the_same_on_both(name: str, mode: str) -> None:
    program = PROGRAMS[name]
    theirs = seen_by_user(_langchain, program, mode)
    ours = seen_by_user(_ours, program, mode)
    assert theirs["answer"] == program[2]
    assert ours == theirs


def test_both_show_the_dynamic_prompt() -> None:
    for build in (_langchain, _ours):
        model = FakeToolModel(messages=replies("Done."))
        build(model, [IDEMPOTENT_LOOKUP], [by_user]).invoke({"messages": [HumanMessage("hi")]})
        assert model.seen[0][0].text.endswith("You help the user named in the context.")


@before_model
def keep_first_and_last_two(state: Any, runtime: Any) -> dict[str, Any] | None:
    """LangChain's short-term memory page's trim: the first message and the latest ones."""
    messages = state["messages"]
    if len(messages) <= 3:
        return None
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), messages[0], *messages[-2:]]}


@after_model
def drop_oldest_two(state: Any, runtime: Any) -> dict[str, Any] | None:
    """The same page's deletion: the two oldest messages go once there are more."""
    messages = state["messages"]
    if len(messages) <= 2:
        return None
    return {"messages": [RemoveMessage(id=m.id) for m in messages[:2]]}


KEPT = pytest.mark.xfail(
    strict=True,
    reason="gated-react keeps the messages a hook removes in the thread (they are left out of "
    "what the model is shown that step only): removing them could leave a call's result "
    "without its call, or shorten the thread so that a new question takes an earlier run's id "
    "and record. The stored messages differ, and an after_model deletion shows the model the "
    "deleted messages on the next turn",
)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "hook",
    [pytest.param(keep_first_and_last_two, id="trim"),
     pytest.param(drop_oldest_two, id="delete", marks=KEPT)],
)  # fmt: skip
def test_what_the_model_is_sent_and_the_thread_keeps_under_a_removing_hook(
    hook: AgentMiddleware, mode: str
) -> None:
    """What LangChain's trim and delete recipes make of a four-turn chat, on both: the trim
    (run before every model call) sends the model the same; the deletion does not."""
    seen = {}
    for name, build in (("langchain", create_agent), ("ours", build_graph)):
        model = FakeToolModel(messages=replies("Hi Bob!", "A poem.", "A haiku.", "I don't know."))
        app = build(model, [IDEMPOTENT_LOOKUP], middleware=[hook], checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "t"}}
        for said in ("hi! I'm bob", "write a poem", "now a haiku", "what's my name?"):
            given = {"messages": [HumanMessage(said)]}
            if mode == "async":
                asyncio.run(app.ainvoke(given, config))
            else:
                app.invoke(given, config)
        sent = [[m.text for m in request if m.type != "system"] for request in model.seen]
        seen[name] = sent
    assert seen["ours"] == seen["langchain"]


@before_model
def forget_everything(state: Any, runtime: Any) -> dict[str, Any]:
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), state["messages"][-1]]}


def test_a_hooks_removal_is_left_out_of_that_request_and_the_thread_keeps_it() -> None:
    """The run is read from its messages, and a thread's run ids from where it stands: a hook
    may leave messages out of what the model is shown, never out of the thread."""
    model = FakeToolModel(messages=replies("First.", _call("z"), "Second."))
    app = build_graph(model, [IDEMPOTENT_LOOKUP], middleware=[forget_everything],
                      checkpointer=InMemorySaver())  # fmt: skip
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [HumanMessage("one")]}, config)
    out = app.invoke({"messages": [HumanMessage("two")]}, config)
    stored = [m.text for m in app.get_state(config).values["messages"]]
    assert stored == ["one", "First.", "two", "", "facts about z", "Second."]
    assert out["status"] == "ok"
    assert [[m.text for m in r if m.type != "system"] for r in model.seen[1:]] == [
        ["two"], ["facts about z"]
    ]  # fmt: skip


class MessageLimit(AgentMiddleware):
    """LangChain's custom-middleware page: ends the conversation at a number of messages."""

    def __init__(self, max_messages: int) -> None:
        super().__init__()
        self.max_messages = max_messages

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if len(state["messages"]) >= self.max_messages:
            return {"messages": [AIMessage("Conversation limit reached.")], "jump_to": "end"}
        return None


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hook_that_jumps_to_the_end_ends_the_run_with_its_message_on_both(mode: str) -> None:
    """Before: ``jump_to: "end"`` ended the run ``middleware_error`` with a developer's
    message as the answer ("only the gate routes a run")."""
    seen = {}
    for name, build in (("langchain", create_agent), ("ours", build_graph)):
        model = FakeToolModel(messages=replies("Hello!"))
        app = build(model, [IDEMPOTENT_LOOKUP], middleware=[MessageLimit(3)],
                    checkpointer=InMemorySaver())  # fmt: skip
        config: Any = {"configurable": {"thread_id": "t"}}
        outs = []
        for said in ("hi", "again"):
            given = {"messages": [HumanMessage(said)]}
            run = app.ainvoke(given, config) if mode == "async" else None
            outs.append(asyncio.run(run) if run else app.invoke(given, config))
        seen[name] = ([o["messages"][-1].text for o in outs], len(model.seen))
    assert seen["ours"] == seen["langchain"] == (["Hello!", "Conversation limit reached."], 1)


@before_model(can_jump_to=["end"])
def jump_without_an_answer(state: Any, runtime: Any) -> dict[str, Any]:
    return {"jump_to": "end"}


def test_a_jump_to_the_end_without_an_answer_is_a_middleware_error() -> None:
    model = FakeToolModel(messages=replies("Hello!"))
    app = build_graph(model, [IDEMPOTENT_LOOKUP], middleware=[jump_without_an_answer])
    out = app.invoke({"messages": [HumanMessage("hi")]})
    assert out["stop_reason"] == "middleware_error:jump_without_an_answer"
    assert "jump_to 'end' with no answer last in the messages" in out["message"]
    assert model.seen == []


@before_model
def undeclared_jump(state: Any, runtime: Any) -> dict[str, Any]:
    return {"jump_to": "end"}


def test_a_jump_the_hook_does_not_declare_is_no_jump_on_both() -> None:
    """create_agent has no edge for a jump a hook does not declare (``can_jump_to``): the run
    goes on to the model. Before: it ended ``middleware_error`` here."""
    answers = []
    for build in (create_agent, build_graph):
        model = FakeToolModel(messages=replies("Hello!"))
        out = build(model, [IDEMPOTENT_LOOKUP], middleware=[undeclared_jump]).invoke(
            {"messages": [HumanMessage("hi")]}
        )
        answers.append((out["messages"][-1].text, len(model.seen)))
    assert answers == [("Hello!", 1), ("Hello!", 1)]
