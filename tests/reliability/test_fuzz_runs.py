"""Whole runs with a model that emits random sequences of valid and invalid actions.

Hypothesis draws a policy (allowlist, budgets, per-tool caps, error and retry modes, loop
detection) and a script of moves for ``ScriptedChatModel``: calls to allowed, denied and unknown
tools with good or junk arguments, final answers, garbage, several calls at once and model
failures. Every run goes against the shipped toolkits (support, calculator, sql on a temp file,
workspace on a temp folder, search), each tool wrapped to count its real executions, with an
``InMemorySaver`` so every checkpoint is serialized; ``kit.check_run`` then checks the run.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Budget, Policy, build_graph
from gated_react.testing import ScriptedChatModel

from ..support.results import ainvoked, invoked
from . import tally
from .kit import (
    ALLOWABLE,
    DELETED,
    NEVER_ALLOWED,
    UNKNOWN,
    VALID_ARGS,
    Executions,
    Toolkits,
    check_run,
    counted,
)
from .strategies import RUN_EXAMPLES, any_text, json_objects, json_values

_ids = itertools.count()


@st.composite
def policies(draw: st.DrawFn, protocol: str) -> Policy:
    capped = st.sampled_from([*ALLOWABLE, *NEVER_ALLOWED])
    budget = Budget(
        max_steps=draw(st.sampled_from([8, 6, 4, 3, 2, 1])),  # hypothesis favours the first
        max_tool_calls=draw(st.sampled_from([6, 5, 4, 3, 2, 1, 0])),
        max_seconds=3600,  # time is not what these runs vary
        tool_limits=draw(st.dictionaries(capped, st.sampled_from([3, 2, 1, 0]), max_size=3)),
    )
    allow = draw(
        st.none() | st.just(frozenset(ALLOWABLE)) | st.frozensets(st.sampled_from(ALLOWABLE))
    )
    return Policy(
        budget=budget,
        allow=frozenset(ALLOWABLE) if allow is None else allow,  # None would allow everything
        protocol=protocol,  # type: ignore[arg-type]
        on_tool_error=draw(st.sampled_from(["stop", "observe"])),
        on_invalid_action=draw(st.sampled_from(["stop", "retry"])),
        max_invalid_retries=draw(st.integers(0, 2)),
        loop_detection=draw(st.sampled_from(["exact", "normalized", "off"])),
        context_steps=draw(st.sampled_from([None, 1, 3, 16])),
        context_keep=draw(st.sampled_from([0, 2])),
        tool_timeout_seconds=60,
    )


@st.composite
def tool_move(draw: st.DrawFn, allowed: tuple[str, ...]) -> tuple[str, Any]:
    """Mostly a well-formed call to an allowed tool; else denied, unknown or junk."""
    pools = {"allowed": allowed or ALLOWABLE, "any": ALLOWABLE}
    pools |= {"never": NEVER_ALLOWED, "unknown": UNKNOWN}
    pool = draw(st.sampled_from(["allowed"] * 6 + ["any", "never", "unknown"]))
    name = draw(st.sampled_from(pools[pool]))
    good = draw(st.sampled_from(VALID_ARGS.get(name, [{}])))
    junk = draw(st.sampled_from([False] * 7 + [True]))
    args = draw(json_objects | json_values) if junk else good
    return ("tool", (name, args))


@st.composite
def move(draw: st.DrawFn, allowed: tuple[str, ...]) -> tuple[str, Any]:
    """Two moves in three are tool calls; the rest end, break or fail the turn."""
    kind = draw(st.sampled_from(["tool"] * 8 + ["final", "garbage", "multi", "raise"]))
    if kind == "tool":
        return draw(tool_move(allowed))
    if kind == "final":
        return ("final", draw(st.just("The answer is 42.") | any_text))
    if kind == "garbage":
        return ("garbage", draw(any_text))
    if kind == "multi":
        return ("multi", (draw(tool_move(allowed)), draw(tool_move(allowed))))
    return ("raise", draw(st.sampled_from([TimeoutError("slow"), RuntimeError("boom")])))


@st.composite
def scenarios(draw: st.DrawFn, protocol: str) -> tuple[Policy, list[Any]]:
    policy = draw(policies(protocol))
    allowed = tuple(sorted(policy.allow or ()))
    return policy, draw(st.lists(move(allowed), min_size=2, max_size=10))


def render(move: tuple[str, Any], protocol: str) -> Any:
    """One move as the model says it in the protocol."""
    kind, value = move
    if kind == "raise":
        return value
    if kind == "multi":
        first, second = (render(m, protocol) for m in value)
        if protocol == "tools":
            return AIMessage("", tool_calls=[*first.tool_calls, *second.tool_calls])
        return f"{first}\n{second}"
    return RENDER[protocol](kind, value)


def _native(kind: str, value: Any) -> AIMessage:
    if kind != "tool":
        return AIMessage(value)  # a final answer, or garbage: text without a call
    name, args = value
    if not isinstance(args, dict):
        bad = {"name": name, "args": json.dumps(args), "id": "b", "error": "not an object"}
        return AIMessage("", invalid_tool_calls=[bad])
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": "c"}])


def _json(kind: str, value: Any) -> str:
    if kind == "tool":
        return json.dumps({"kind": "tool", "name": value[0], "args": value[1]})
    return json.dumps({"kind": "final", "answer": value}) if kind == "final" else value


def _text(kind: str, value: Any) -> str:
    if kind == "tool":
        return f"Thought: next\nAction: {value[0]}\nAction Input: {json.dumps(value[1])}"
    return f"Thought: done\nFinish: {value}" if kind == "final" else value


RENDER = {"tools": _native, "json": _json, "text": _text}


def fuzz_run(
    toolkits: Toolkits, protocol: str, policy: Policy, script: list[Any], use_async: bool
) -> None:
    executions = Executions()
    tools = counted(toolkits.tools, executions)
    model = ScriptedChatModel(replies=[render(move, protocol) for move in script])
    graph = build_graph(model, tools, policy=policy, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": f"fuzz-{next(_ids)}"}}
    deleted = len(DELETED)
    if use_async:
        out = asyncio.run(ainvoked(graph, {"goal": "Help user 42."}, config))
    else:
        out = invoked(graph, {"goal": "Help user 42."}, config)
    # a reply lost on its way back (a timeout) is paid for but made no decision: no step
    asked = script[: len(model.requests)]
    lost = sum(1 for kind, value in asked if kind == "raise" and isinstance(value, TimeoutError))
    check_run(dict(out), policy, toolkits.names, executions, len(model.requests) - lost)
    assert len(DELETED) == deleted
    assert graph.get_state(config).values["stop_reason"] == out["stop_reason"]  # stored as run
    tally.count(f"fuzz runs: {protocol}")
    tally.count("fuzz runs: tool executions checked", executions.total)
    tally.count(f"fuzz runs: stop {out['stop_reason'].split(':')[0]}")


def known(protocol: str) -> list[tuple[Policy, list[Any]]]:
    """Scenarios the fuzzing found a bug with, tried on every run whatever the examples drawn:
    a reply retried after a tool step, and a call with bad arguments under observe."""
    budget = Budget(max_steps=8, max_tool_calls=6, max_seconds=3600)
    base = Policy(budget=budget, allow=frozenset(ALLOWABLE), protocol=protocol,  # type: ignore[arg-type]
                  tool_timeout_seconds=60)  # fmt: skip
    ran = ("tool", ("calculate", {"expression": "49 * 0.5"}))
    retried = base.replace(on_invalid_action="retry", max_invalid_retries=1)
    observed = base.replace(on_tool_error="observe")
    return [(retried, [ran, ("garbage", "")]), (observed, [ran, ("tool", ("calculate", {}))])]


@pytest.mark.parametrize("protocol", ["tools", "json", "text"])
def test_random_scripts_keep_every_promise(toolkits: Toolkits, protocol: str) -> None:
    retried, observed = known(protocol)

    @settings(max_examples=RUN_EXAMPLES)
    @given(scenario=scenarios(protocol), use_async=st.booleans())
    @example(scenario=retried, use_async=False)
    @example(scenario=observed, use_async=False)
    def check(scenario: tuple[Policy, list[Any]], use_async: bool) -> None:
        fuzz_run(toolkits, protocol, *scenario, use_async)

    check()
