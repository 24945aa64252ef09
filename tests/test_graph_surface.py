"""build_graph takes create_agent's parameters with create_agent's meaning: system_prompt,
response_format (structured_response), context_schema (context= at invoke and stream), store
and name."""

from __future__ import annotations

import asyncio
import json
from typing import Any, TypedDict

import pytest
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolRuntime
from langgraph.store.memory import InMemoryStore
from pydantic import BaseModel
from typing_extensions import TypedDict as TypedDictExt

from gated_react import ArgumentRefused, Policy, build_graph, result_of, resume, run
from gated_react.errors import GatedReactError
from gated_react.testing import ScriptedChatModel, call

from .support.results import ainvoked, invoked


class Weather(BaseModel):
    city: str
    sunny: bool


class Ctx(BaseModel):
    user_id: str


def weather(city: str, runtime: ToolRuntime[Ctx]) -> str:
    """The weather in a city, for the user the context names."""
    return f"{city}: sunny (for {runtime.context.user_id})"


def _system(model: ScriptedChatModel) -> str:
    first = model.requests[0][0]
    assert isinstance(first, SystemMessage)
    return first.text


def test_the_system_prompt_comes_after_the_fixed_rules() -> None:
    """A text protocol's reply format comes first, so graphs with different prompts share the
    prefix a server caches; native tool calling needs no rules, and the app's prompt is the
    whole system prompt (none without one), as under ``create_agent``."""
    desk = "You are Acme's weather desk."
    json_mode = Policy(protocol="json")
    plain = ScriptedChatModel(replies=['{"kind": "final", "answer": "ok"}'])
    build_graph(plain, [weather], policy=json_mode).invoke({"goal": "g"})
    told = ScriptedChatModel(replies=['{"kind": "final", "answer": "ok"}'])
    build_graph(told, [weather], system_prompt=desk, policy=json_mode).invoke({"goal": "g"})
    assert _system(plain)
    assert _system(told).startswith(_system(plain))  # the cacheable prefix is unchanged
    assert _system(told).endswith(desk)
    native = ScriptedChatModel(replies=["ok"])
    build_graph(native, [weather]).invoke({"goal": "g"})
    assert not isinstance(native.requests[0][0], SystemMessage)
    native = ScriptedChatModel(replies=["ok"])
    build_graph(native, [weather], system_prompt=desk).invoke({"goal": "g"})
    assert _system(native) == desk
    as_message = ScriptedChatModel(replies=["ok"])
    prompt = SystemMessage("Answer in French.")
    build_graph(as_message, [weather], system_prompt=prompt).invoke({"goal": "g"})
    assert _system(as_message).endswith("Answer in French.")


def test_a_system_prompt_of_another_type_is_one_line() -> None:
    with pytest.raises(TypeError, match="system_prompt must be a str or SystemMessage, got int"):
        build_graph(ScriptedChatModel(replies=[]), [], system_prompt=3)  # type: ignore[arg-type]


def test_response_format_gives_structured_response() -> None:
    """As ``create_agent`` asks for it: a tool named after the schema, called by the model,
    the answer the schema's object and the tool's own result in the conversation
    (``ToolStrategy``, what a schema alone is for a model without provider structured output);
    a text protocol asks for the JSON in its prompt (``Policy.answer_schema``)."""
    model = ScriptedChatModel(replies=[call("Weather", city="Oslo", sunny=True)])
    out = build_graph(model, [weather], response_format=Weather).invoke({"goal": "g"})
    assert out["stop_reason"] == "success"
    assert out["structured_response"] == Weather(city="Oslo", sunny=True)
    said = out["messages"][-1]
    assert (said.type, said.text) == (
        "tool",
        "Returning structured response: city='Oslo' sunny=True",
    )
    model = ScriptedChatModel(replies=[call("Weather", city="Oslo", sunny=False)])
    out = build_graph(model, [], response_format=ToolStrategy(Weather)).invoke({"goal": "g"})
    assert out["structured_response"] == Weather(city="Oslo", sunny=False)
    answer = json.dumps({"kind": "final", "answer": '{"city": "Oslo", "sunny": true}'})
    model = ScriptedChatModel(replies=[answer])
    graph = build_graph(model, [weather], response_format=Weather, policy=Policy(protocol="json"))
    out = graph.invoke({"goal": "g"})
    assert out["structured_response"] == Weather(city="Oslo", sunny=True)
    assert '"title": "Weather"' in _system(model)  # the schema is Policy.answer_schema's prompt


def test_structured_response_is_none_without_a_schema_and_fresh_each_run() -> None:
    out = build_graph(ScriptedChatModel(replies=["ok"]), []).invoke({"goal": "g"})
    assert out.get("structured_response") is None
    final = json.dumps({"kind": "final", "answer": '{"city": "Oslo", "sunny": true}'})
    wrong = json.dumps({"kind": "final", "answer": "not json"})
    model = ScriptedChatModel(replies=[final, wrong, wrong])
    graph = build_graph(model, [], response_format=Weather, checkpointer=InMemorySaver(),
                        policy=Policy(protocol="json"))  # fmt: skip
    first = run(graph, "one", thread_id="t-sr")
    assert Weather.model_validate(first["structured_response"]) == Weather(city="Oslo", sunny=True)
    graph.invoke({"goal": "two"}, {"configurable": {"thread_id": "t-sr"}})
    second = graph.get_state({"configurable": {"thread_id": "t-sr"}}).values
    assert second["stop_reason"] == "invalid_action:answer_schema"
    assert second["structured_response"] is None


def test_a_response_format_that_is_no_schema_is_one_line() -> None:
    with pytest.raises(ValueError, match="Unsupported schema type") as caught:
        build_graph(ScriptedChatModel(replies=[]), [], response_format=3)
    assert "\n" not in str(caught.value)

    class Plain(TypedDictExt):
        city: str

    model = ScriptedChatModel(replies=[call("Plain", city="Oslo")])
    out = build_graph(model, [], response_format=Plain).invoke({"goal": "g"})
    assert out["structured_response"] == {"city": "Oslo"}  # a TypedDict, as create_agent takes


def test_a_typing_typeddict_pydantic_cannot_read_is_one_line() -> None:
    class Plain(TypedDict):
        city: str

    with pytest.raises(GatedReactError) as caught:
        build_graph(ScriptedChatModel(replies=[]), [], response_format=Plain)
    assert "\n" not in str(caught.value)
    assert "typing_extensions.TypedDict" in str(caught.value)


@pytest.mark.parametrize("protocol", ["tools", "json"])
def test_two_answer_schemas_are_refused(protocol: Any) -> None:
    """Under native tool calling (LangChain's strategies) and under a text protocol alike."""
    with pytest.raises(ValueError, match=r"response_format Weather and Policy\.answer_schema Ctx"):
        build_graph(
            ScriptedChatModel(replies=[]),
            [],
            response_format=ToolStrategy(Weather) if protocol == "tools" else Weather,
            policy=Policy(answer_schema=Ctx, protocol=protocol),
        )
    with pytest.raises(GatedReactError):
        build_graph(ScriptedChatModel(replies=[]), [], response_format=Weather,
                    policy=Policy(answer_schema=Ctx, protocol=protocol))  # fmt: skip


def test_context_reaches_tools_through_invoke_stream_and_ainvoke() -> None:
    def graph() -> Any:
        replies = [call("weather", city="Oslo"), "sunny"]
        return build_graph(ScriptedChatModel(replies=replies), [weather], context_schema=Ctx)

    seen = "Oslo: sunny (for u1)"
    out = invoked(graph(), {"goal": "g"}, context={"user_id": "u1"})  # coerced, as LangGraph does
    assert out["history"][0]["observation"] == seen, out["message"]
    streamed = graph()
    values = list(streamed.stream({"goal": "g"}, context=Ctx(user_id="u1"), stream_mode="values"))
    assert result_of(streamed, values[-1])["history"][0]["observation"] == seen
    out = asyncio.run(ainvoked(graph(), {"goal": "g"}, context=Ctx(user_id="u1")))
    assert out["history"][0]["observation"] == seen
    assert graph().get_context_jsonschema()["title"] == "Ctx"  # Studio's form


def test_run_and_resume_pass_a_context() -> None:
    model = ScriptedChatModel(replies=[call("weather", city="Oslo"), "sunny"])
    graph = build_graph(
        model,
        [weather],
        context_schema=Ctx,
        checkpointer=InMemorySaver(),
        policy=Policy(require_approval={"weather"}),
    )
    paused = run(graph, "g", thread_id="t-ctx", context=Ctx(user_id="u9"))
    assert paused["status"] == "paused"
    out = resume(graph, "t-ctx", {"approved": True}, context=Ctx(user_id="u9"))
    assert out["history"][0]["observation"] == "Oslo: sunny (for u9)", out["message"]


def test_store_and_name_are_the_compiled_graphs() -> None:
    store = InMemoryStore()
    graph = build_graph(ScriptedChatModel(replies=[]), [], store=store, name="weather-desk")
    assert graph.store is store
    assert graph.name == "weather-desk"
    assert build_graph(ScriptedChatModel(replies=[]), []).name == "gated-react"


@pytest.mark.parametrize("name", ["branch:to:execute", "__interrupt__"])
def test_a_state_field_named_like_langgraphs_channels_is_refused_in_one_line(name: str) -> None:
    """Written as input, such a field wrote LangGraph's own channel (``InvalidUpdateError``,
    or a branch taken that the gate never chose)."""
    schema = TypedDict("Schema", {"messages": list[Any], name: bool})  # type: ignore[misc]
    with pytest.raises(ArgumentRefused, match="which LangGraph keeps for itself") as caught:
        build_graph(ScriptedChatModel(replies=["hi"]), [], state_schema=schema)
    assert "\n" not in str(caught.value)


def test_a_state_schema_that_is_no_agent_state_is_one_line() -> None:
    with pytest.raises(ArgumentRefused, match=r"^state_schema must be a TypedDict") as caught:
        build_graph(ScriptedChatModel(replies=["hi"]), [], state_schema=dict)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("given", "instead"),
    [
        ({"interrupt_before": ["tools"]}, "require_approval"),
        ({"interrupt_after": ["tools"]}, "on_budget='ask'"),
        ({"debug": True}, "debug=True"),
        ({"cache": object()}, "never counted"),
        ({"tool_choice": "any"}, "not an argument of build_graph or create_agent"),
    ],
)
def test_create_agents_other_arguments_are_refused_with_the_way_forward(
    given: dict[str, Any], instead: str
) -> None:
    """Before: a bare ``TypeError: unexpected keyword argument`` (found by a tester moving a
    create_agent app over)."""
    with pytest.raises(ArgumentRefused, match=r"^build_graph\(\) does not take ") as caught:
        build_graph(ScriptedChatModel(replies=["hi"]), [], **given)
    assert instead in str(caught.value)
    assert isinstance(caught.value, TypeError)
