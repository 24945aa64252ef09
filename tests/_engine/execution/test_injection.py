"""Tools written for ``create_agent`` get what it gives them (``ToolRuntime``, ``InjectedState``,
``InjectedStore``, ``InjectedToolCallId``), filled in execute; the model and the gate never see
the injected arguments."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolArg, InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import InjectedState, InjectedStore, ToolRuntime
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from gated_react import Policy, build_graph, result_of
from gated_react._engine.execution.call_keys import args_hash
from gated_react.testing import ScriptedChatModel, call

from ...support.helpers import node_deps
from ...support.results import ainvoked, invoked
from ...support.spans import recorded


@dataclass
class Ctx:
    user_id: str


SEEN: list[dict[str, Any]] = []


@tool
def profile(field: str, runtime: ToolRuntime[Ctx]) -> str:
    """A field of the user's profile."""
    assert runtime.store is not None
    found = runtime.store.get(("users",), runtime.context.user_id)
    runtime.stream_writer({"looked_up": field})
    SEEN.append(
        {
            "id": runtime.tool_call_id,
            "goal": runtime.state["messages"][0].text,
            "state": sorted(runtime.state),
            "thread": runtime.config["configurable"].get("thread_id"),
            "tools": sorted(t.name for t in runtime.tools),
        }
    )
    return f"{field}={found.value[field] if found else None}"


@tool
def injected(
    x: int,
    call_id: Annotated[str, InjectedToolCallId],
    state: Annotated[dict[str, Any], InjectedState],
    messages: Annotated[list[Any], InjectedState("messages")],
    store: Annotated[BaseStore, InjectedStore()],
) -> ToolMessage:
    """Everything injected at once; returns a ToolMessage, as create_agent tools may."""
    assert state["messages"] == messages
    goal = messages[0].text
    return ToolMessage(f"x={x} goal={goal} store={type(store).__name__}", tool_call_id=call_id)


@tool
def keyed(
    note: str, runtime: ToolRuntime[Ctx], idempotency_key: Annotated[str, InjectedToolArg]
) -> str:
    """Takes a note (and, hidden, the key execute passes itself)."""
    return f"{note}:{idempotency_key == runtime.tool_call_id}"


def _store() -> InMemoryStore:
    store = InMemoryStore()
    store.put(("users",), "u1", {"plan": "pro"})
    return store


def _graph(replies: list[Any], tools: list[Any], **kwargs: Any) -> Any:
    model = ScriptedChatModel(replies=replies)
    graph = build_graph(model, tools, context_schema=Ctx, store=_store(), **kwargs)
    return model, graph


def test_a_tool_runtime_gets_context_store_state_config_writer_and_id() -> None:
    SEEN.clear()
    _, graph = _graph([call("profile", field="plan"), "pro"], [profile, injected])
    config = {"configurable": {"thread_id": "t-rt"}}
    custom = []
    out: dict[str, Any] = {}
    for mode, chunk in graph.stream(
        {"goal": "plan?"}, config, context=Ctx("u1"), stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            custom.append(chunk)
        else:
            out = chunk
    out = {**out, **result_of(graph, out, config)}
    assert out["stop_reason"] == "success", out["message"]
    assert out["history"][0]["observation"] == "plan=pro"
    assert custom == [{"looked_up": "plan"}]
    assert SEEN[0]["goal"] == "plan?"
    assert "messages" in SEEN[0]["state"]  # create_agent's state; the gate's step is no tool's
    assert {"step", "goal"}.isdisjoint(SEEN[0]["state"])
    assert SEEN[0]["thread"] == "t-rt"
    assert SEEN[0]["tools"] == ["injected", "profile"]


def test_injected_state_store_and_tool_call_id_sync_and_async() -> None:
    replies = [call("injected", x=3), "done"]
    _, graph = _graph(replies, [injected])
    out = invoked(graph, {"goal": "go"}, context=Ctx("u1"))
    assert out["stop_reason"] == "success", out["message"]
    assert out["history"][0]["observation"] == "x=3 goal=go store=InMemoryStore"
    _, graph = _graph(replies, [injected])
    out = asyncio.run(ainvoked(graph, {"goal": "go"}, context=Ctx("u1")))
    assert out["history"][0]["observation"] == "x=3 goal=go store=InMemoryStore"


def test_an_async_tool_gets_its_runtime() -> None:
    @tool
    async def aprofile(field: str, runtime: ToolRuntime[Ctx]) -> str:
        """Async."""
        return f"{field} of {runtime.context.user_id}"

    _, graph = _graph([call("aprofile", field="plan"), "ok"], [aprofile])
    out = asyncio.run(ainvoked(graph, {"goal": "g"}, context=Ctx("u7")))
    assert out["history"][0]["observation"] == "plan of u7", out["message"]


def test_the_idempotency_key_reaches_a_runtime_tool_beside_the_models_call_id() -> None:
    """The key stays the key (stable for thread, step, tool and arguments); the tool call id
    is the model's, as for every other tool."""
    _, graph = _graph([call("keyed", note="n"), "ok"], [keyed])
    out = invoked(graph, {"goal": "g"}, context=Ctx("u1"))
    assert out["history"][0]["observation"] == "n:False", out["message"]


@tool
def whoami(runtime: ToolRuntime[Ctx]) -> str:
    """My call's id, and whether the conversation holds it."""
    ids = [c["id"] for m in runtime.state["messages"] for c in getattr(m, "tool_calls", [])]
    return f"{runtime.tool_call_id} {runtime.tool_call_id in ids}"


@tool
def echo_id(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """The injected call id."""
    return tool_call_id


@pytest.mark.parametrize("protocol", ["tools", "json"])
@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_a_tool_is_given_the_models_call_id_that_its_tool_message_answers(
    protocol: str, use_async: bool
) -> None:
    """As ``create_agent`` gives it: before, the idempotency key, in no message. The json
    protocol has no native ids: the stable ids ``messages`` holds are the ones given."""
    replies: list[Any] = [call("whoami"), call("echo_id", text="x"), "done"]
    if protocol == "json":
        replies = [
            '{"kind": "tool", "name": "whoami", "args": {}}',
            '{"kind": "tool", "name": "echo_id", "args": {"text": "x"}}',
            '{"kind": "final", "answer": "done"}',
        ]
    _, graph = _graph(replies, [whoami, echo_id], policy=Policy(protocol=protocol))
    given = {"messages": [{"role": "user", "content": "go"}]}
    if use_async:
        out = asyncio.run(graph.ainvoke(given, context=Ctx("u1")))
    else:
        out = graph.invoke(given, context=Ctx("u1"))
    asked = [c["id"] for m in out["messages"] for c in getattr(m, "tool_calls", [])]
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == asked
    assert [m.text.split()[0] for m in results] == asked
    assert results[0].text.endswith(" True")


def test_the_model_is_never_shown_an_injected_argument() -> None:
    tools = [profile, injected, keyed]
    for protocol in ("tools", "json", "text"):
        deps = node_deps(ScriptedChatModel(replies=[]), tools, Policy(protocol=protocol))
        shown = deps.system + json.dumps(getattr(deps.bound, "kwargs", {}), default=str)
        for hidden in ("runtime", "call_id", "InjectedState", "store", "idempotency_key"):
            assert hidden not in shown, (protocol, hidden)
        assert "field" in shown
        assert "note" in shown


def test_the_gate_sees_only_the_models_arguments() -> None:
    policy = Policy(require_approval={"profile"}, loop_detection="exact")
    _model, graph = _graph(
        [call("profile", field="plan"), call("profile", field="plan")],
        [profile],
        policy=policy,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t-gate"}}
    paused = graph.invoke({"goal": "g"}, config, context=Ctx("u1"))
    question = paused["__interrupt__"][0].value
    assert question["args"] == {"field": "plan"}
    assert question["action_requests"][0]["args"] == {"field": "plan"}
    out = invoked(graph, Command(resume={"approved": True}), config, context=Ctx("u1"))
    assert out["trace"][0]["args_hash"] == args_hash({"field": "plan"})
    assert out["stop_reason"] == "loop_detected"  # the same model call, whatever's injected
    assert "runtime" not in json.dumps(out, default=str)


def test_an_injected_argument_the_model_forges_is_refused() -> None:
    _, graph = _graph([call("profile", field="plan", runtime="evil")], [profile])
    out = graph.invoke({"goal": "g"}, context=Ctx("u1"))
    assert out["stop_reason"] == "tool_bad_args:profile"
    assert "unknown arguments ['runtime']" in out["message"]


def test_a_tool_that_says_it_returns_a_command_is_refused_at_build() -> None:
    """Before: refused only at its first call (found by a tester moving a create_agent app)."""

    @tool
    def jump(x: int, call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Tries to write the graph's state."""
        return Command(update={"answer": "forged"})

    def plain(x: int) -> Command[Any]:
        """A plain function, as create_agent takes them."""
        raise AssertionError("never called")

    for returns_command in (jump, plain):
        with pytest.raises(TypeError, match=r"returns a Command .*return the data instead"):
            _graph([call("jump", x=1)], [returns_command])


def test_a_tool_returning_a_command_unannounced_fails_with_a_reason() -> None:
    @tool
    def jump(x: int, call_id: Annotated[str, InjectedToolCallId]) -> Any:
        """Tries to write the graph's state."""
        return Command(update={"answer": "forged"})

    _, graph = _graph([call("jump", x=1)], [jump])
    out = invoked(graph, {"goal": "g"}, context=Ctx("u1"))
    assert out["stop_reason"] == "tool_error:jump"
    assert "returned a Command" in out["message"]
    assert out["answer"] is None


def test_a_store_tool_without_a_store_stops_with_the_reason() -> None:
    graph = build_graph(ScriptedChatModel(replies=[call("injected", x=1)]), [injected])
    out = graph.invoke({"goal": "g"})
    assert out["stop_reason"] == "tool_error:injected"
    assert "compile your graph with a store" in out["message"]


def test_plain_functions_are_tools_as_create_agent_makes_them() -> None:
    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    def weather(city: str, runtime: ToolRuntime[Ctx]) -> str:
        """The weather in a city."""
        return f"{city} sunny for {runtime.context.user_id}"

    replies = [call("double", x=21), call("weather", city="Oslo"), "42"]
    _, graph = _graph(replies, [double, weather])
    out = invoked(graph, {"goal": "g"}, context=Ctx("u1"))
    results = [m.text for m in out["messages"] if isinstance(m, ToolMessage)]
    assert results == ["42", "Oslo sunny for u1"]  # as create_agent shows them
    assert [h["action"]["name"] for h in out["history"]] == ["double", "weather"]


def test_a_function_that_cannot_be_a_tool_is_one_line() -> None:
    def nodoc(x: int) -> int:
        return x

    with pytest.raises(TypeError, match=r"function nodoc cannot be a tool: .*docstring"):
        build_graph(ScriptedChatModel(replies=[]), [nodoc])
    with pytest.raises(TypeError, match="or plain functions, got dict"):
        build_graph(ScriptedChatModel(replies=[]), [{"type": "web_search"}])  # type: ignore[list-item]


def test_a_runtime_tool_runs_on_a_graph_without_context_or_store() -> None:
    """The issue's first failure: ``tool_error: ... runtime Field required``."""

    @tool
    def where(runtime: ToolRuntime) -> str:
        """The question the run works on."""
        return f"{runtime.state['messages'][0].text} ({runtime.context} {runtime.store})"

    graph = build_graph(ScriptedChatModel(replies=[call("where"), "ok"]), [where])
    out = invoked(graph, {"goal": "find it"})
    assert out["history"][0]["observation"] == "find it (None None)", out["message"]


def test_a_tool_span_records_the_models_arguments_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """With content capture on, the execute_tool span holds what the model sent, and no span
    holds the injected runtime, store or context."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    _, graph = _graph([call("profile", field="plan"), "pro"], [profile])
    with recorded() as exporter:
        graph.invoke({"goal": "plan?"}, context=Ctx("secret-user"))
    spans = exporter.get_finished_spans()
    (tool_span,) = [s for s in spans if s.name == "execute_tool profile"]
    assert tool_span.attributes is not None
    assert json.loads(str(tool_span.attributes["gen_ai.tool.call.arguments"])) == {"field": "plan"}
    shown = " ".join(str(v) for s in spans for v in (s.attributes or {}).values())
    assert "secret-user" not in shown
    assert "ToolRuntime" not in shown


def test_a_writer_masking_the_keys_already_is_not_wrapped_again() -> None:
    """execute's config carries a masking writer; the ToolRuntime built from it masks once."""
    from gated_react._engine.execution.injection import _masking

    seen: list[Any] = []
    once = _masking(seen.append, ("sk-1",))
    assert _masking(once, ("sk-1",)) is once
    assert _masking(once, ("sk-2",)) is not once  # other keys: masked too
    once({"k": "sk-1"})
    assert seen == [{"k": "***"}]
