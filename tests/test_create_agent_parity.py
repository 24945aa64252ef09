"""The same create_agent programs on both constructors: ``langchain.agents.create_agent`` and
``gated_react.build_graph``, each with LangChain's own fake chat model replaying one script.
What the user sees must match: the answer (the last message), what each tool returned (a
structured answer's own tool message included), and ``structured_response``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState, ToolRuntime
from langgraph.store.memory import InMemoryStore
from pydantic import BaseModel

from gated_react import build_graph

from .support.reaping import PATIENCE

MIGRATION = Path(__file__).resolve().parents[1] / "examples" / "api" / "from_create_agent.py"


class FakeToolCallingModel(GenericFakeChatModel):
    """LangChain's fake model; binding tools returns it as it is, as LangChain's own agent
    tests do (the script decides the calls)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@dataclass
class Context:
    user_id: str


class Weather(BaseModel):
    city: str
    sunny: bool


def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"It's always sunny in {city}!"


def user_plan(runtime: ToolRuntime[Context]) -> str:
    """The plan of the user this run is for."""
    assert runtime.store is not None
    found = runtime.store.get(("plans",), runtime.context.user_id)
    return f"{runtime.context.user_id} is on {found.value['plan'] if found else 'no'} plan"


@tool
def first_words(
    state: Annotated[dict[str, Any], InjectedState], call_id: Annotated[str, InjectedToolCallId]
) -> ToolMessage:
    """What the user asked first."""
    first: AnyMessage = state["messages"][0]
    return ToolMessage(f"you asked: {first.text}", tool_call_id=call_id)


def _call(name: str, n: int, *, numbered: bool = False, **args: Any) -> AIMessage:
    """A reply with one call, its id unique to this script (``numbered``: ``call_<n>``, as
    LangChain's fake models and some servers number calls anew in every run)."""
    call_id = f"call_{n}" if numbered else f"call_{n}_{uuid.uuid4().hex[:8]}"
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


@dataclass
class Program:
    """One create_agent program: its script, tools and constructor keywords."""

    script: list[AIMessage]
    tools: list[Any]
    kwargs: dict[str, Any]
    context: Any = None


def _store() -> InMemoryStore:
    store = InMemoryStore()
    store.put(("plans",), "u42", {"plan": "pro"})
    return store


PROGRAMS: dict[str, Callable[[], Program]] = {
    "plain function, system prompt": lambda: Program(
        [_call("get_weather", 1, city="Paris"), AIMessage("Sunny in Paris.")],
        [get_weather],
        {"system_prompt": "You are a helpful assistant."},
    ),
    "ToolRuntime: context and store": lambda: Program(
        [_call("user_plan", 1), AIMessage("You are on the pro plan.")],
        [user_plan],
        {"context_schema": Context, "store": _store()},
        context=Context(user_id="u42"),
    ),
    "InjectedState and InjectedToolCallId, a ToolMessage back": lambda: Program(
        [_call("first_words", 1), AIMessage("You asked about Paris.")],
        [first_words],
        {},
    ),
    "response_format": lambda: Program(
        [
            _call("get_weather", 1, city="Oslo"),
            _call("Weather", 2, city="Oslo", sunny=True),
        ],
        [get_weather],
        {"response_format": Weather},
    ),
}


def _agent(kind: str, program: Program) -> Any:
    model = FakeToolCallingModel(messages=iter(list(program.script)))
    if kind == "create_agent":
        kwargs = dict(program.kwargs)
        if "response_format" in kwargs:
            kwargs["response_format"] = ToolStrategy(kwargs["response_format"])
        return create_agent(model, program.tools, **kwargs)
    return build_graph(model, program.tools, **program.kwargs)


def _seen(kind: str, out: dict[str, Any]) -> dict[str, Any]:
    """What the user reads: the last message, the tools' results, the structured response."""
    results = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    structured = out.get("structured_response")
    if isinstance(structured, dict):
        structured = Weather.model_validate(structured)
    last = out["messages"][-1]
    answer = last.text if structured is None else None
    return {"answer": answer, "tool_results": results, "structured": structured}


def _run(kind: str, program: Program, *, use_async: bool = False) -> dict[str, Any]:
    agent = _agent(kind, program)
    given = {"messages": [{"role": "user", "content": "What's the weather in Paris?"}]}
    if use_async:
        out = asyncio.run(agent.ainvoke(given, context=program.context))
    else:
        out = agent.invoke(given, context=program.context)
    return _seen(kind, out)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_a_create_agent_program_shows_the_same_on_both(name: str, use_async: bool) -> None:
    theirs = _run("create_agent", PROGRAMS[name](), use_async=use_async)
    ours = _run("gated_react", PROGRAMS[name](), use_async=use_async)
    assert ours == theirs
    assert theirs["tool_results"]  # every program ran a tool on both


def test_the_migration_example_differs_from_its_create_agent_app_in_the_constructor_only(
    tmp_path: Path,
) -> None:
    """examples/api/from_create_agent.py with its two marked lines put back runs on
    create_agent and prints the same."""
    ours = MIGRATION.read_text()
    lines = ours.splitlines()
    marked = [i for i, line in enumerate(lines) if "# was: " in line]
    assert len(marked) == 2
    for i in marked:
        lines[i] = lines[i].split("# was: ", 1)[1]
    theirs = tmp_path / "create_agent_app.py"
    theirs.write_text("\n".join(lines) + "\n")
    printed = [
        subprocess.run(
            [sys.executable, str(path)],
            capture_output=True,
            text=True,
            timeout=PATIENCE,
            check=True,
        ).stdout
        for path in (MIGRATION, theirs)
    ]
    assert printed[0] == printed[1] == "Your name is John Smith.\n"
    assert "create_agent(" in theirs.read_text()
    assert "build_graph(" not in theirs.read_text()


PAID: list[int] = []


@tool
def pay(amount: int) -> str:
    """Pay an amount."""
    PAID.append(amount)
    return f"paid {amount}"


def test_a_call_id_an_unrelated_run_used_before_runs_its_own_tool() -> None:
    """Models that number their calls anew in every run (``call_1``) are common: a call of a
    new run is its own, whatever id an earlier run's call had."""
    PAID.clear()
    first = build_graph(
        FakeToolCallingModel(
            messages=iter(
                [_call("get_weather", 1, numbered=True, city="Oslo"), AIMessage("Sunny.")]
            )
        ),
        [get_weather, pay],
    )
    first.invoke({"messages": [{"role": "user", "content": "Weather in Oslo?"}]})
    second = build_graph(
        FakeToolCallingModel(
            messages=iter([_call("pay", 1, numbered=True, amount=5), AIMessage("Paid.")])
        ),
        [get_weather, pay],
    )
    out = second.invoke({"messages": [{"role": "user", "content": "Pay 5."}]})
    results = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert results == ["paid 5"]
    assert PAID == [5]


def _structured(kind: str, script: list[AIMessage], strategy: ToolStrategy[Any]) -> Any:
    model = FakeToolCallingModel(messages=iter(script))
    if kind == "create_agent":
        return create_agent(model, [get_weather], response_format=strategy)
    return build_graph(model, [get_weather], response_format=strategy)


WEATHER = {"messages": [{"role": "user", "content": "Weather in Oslo?"}]}


@pytest.mark.parametrize("two", [False, True], ids=["unfit", "two answers"])
def test_an_answer_that_does_not_fit_is_told_the_model_in_create_agents_words(two: bool) -> None:
    """What the model reads about an answer that misses the schema, or about two answers at
    once, is create_agent's text (a ``handle_errors`` of exception types matches it too)."""
    bad = [{"name": "Weather", "args": {"city": "Oslo", "sunny": "maybe"}, "id": "w1"}]
    if two:
        bad = [{"name": "Weather", "args": {"city": "Oslo", "sunny": True}, "id": f"w{n}"}
               for n in (1, 2)]  # fmt: skip
    script = [AIMessage("", tool_calls=bad), _call("Weather", 3, city="Oslo", sunny=True)]
    told = []
    for kind in ("create_agent", "gated_react"):
        out = _structured(kind, list(script), ToolStrategy(Weather)).invoke(WEATHER)
        assert out["structured_response"] == Weather(city="Oslo", sunny=True)
        told.append([m.text for m in out["messages"] if isinstance(m, ToolMessage)][:-1])
    assert told[0] == told[1]
    assert told[0][0].startswith(
        "Error: Model incorrectly returned multiple structured responses"
        if two
        else "Error: Failed to parse structured output for tool 'Weather'"
    )


def test_handle_errors_false_stops_the_run_where_create_agent_raises() -> None:
    from langchain.agents.structured_output import StructuredOutputValidationError

    bad = AIMessage("", tool_calls=[{"name": "Weather", "args": {"sunny": 1.5}, "id": "w1"}])
    strategy = ToolStrategy(Weather, handle_errors=False)
    with pytest.raises(StructuredOutputValidationError):
        _structured("create_agent", [bad], strategy).invoke(WEATHER)
    out = _structured("gated_react", [bad, _call("Weather", 2, city="Oslo", sunny=True)],
                      strategy).invoke(WEATHER)  # fmt: skip
    assert out["stop_reason"] == "invalid_action:answer_schema"
    assert "Failed to parse structured output for tool 'Weather'" in out["message"]
    assert out["structured_response"] is None


def _raising(exc: Exception) -> str:
    raise RuntimeError("the app's handler failed")


@pytest.mark.parametrize(
    "handle_errors", [_raising, lambda exc: {"not": "text"}, 5], ids=["raises", "dict", "int"]
)
def test_a_handle_errors_that_fails_stops_the_run_in_one_line(handle_errors: Any) -> None:
    """create_agent raises what the app's ``handle_errors`` raised: the run stops instead."""
    bad = AIMessage("", tool_calls=[{"name": "Weather", "args": {"sunny": 1.5}, "id": "w1"}])
    strategy = ToolStrategy(Weather, handle_errors=handle_errors)
    out = _structured("gated_react", [bad], strategy).invoke(WEATHER)
    assert out["stop_reason"] == "invalid_action:answer_schema"
