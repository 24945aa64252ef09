"""Gated parallel calls (``Policy.max_parallel_calls``): validate takes up to N calls from one
reply; the gate checks every call before any runs; execute runs the allowed ones at once, each
with its own key; observe records each; a crash mid-batch repeats no side effect."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Policy, build_graph, resume, run
from gated_react._engine.call_keys import idempotency_key, loop_key
from gated_react._engine.langgraph_internals import CONFIG_KEY_RESUMING
from gated_react.nodes.execute import aexecute, execute
from gated_react.nodes.gate import gate
from gated_react.nodes.observe import observe
from gated_react.nodes.validate import validate
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import REFUND_GOAL, admitted, deps, state
from ..support.helpers import run as scripted_run
from ..support.reaping import PATIENCE
from ..support.scenarios import append_line, lines, record_line

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
PROFILE = {"name": "get_user_profile", "args": {"user_id": 42}}
BILLING = {"name": "get_user_billing", "args": {"user_id": 42}}


def _batch(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "tools", "calls": [{"kind": "tool", **call} for call in calls]}


def _named(action: dict[str, Any]) -> dict[str, Any]:
    """The action without the ids validate gives its calls (checked in test_validate)."""
    calls = [{k: v for k, v in call.items() if k != "id"} for call in action["calls"]]
    return {**action, "calls": calls}


def _reply(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"text": "", "tool_calls": list(calls)}


def test_validate_takes_up_to_max_parallel_calls_from_one_reply() -> None:
    two = validate(state(reply=_reply(PROFILE, BILLING)), deps=deps(max_parallel_calls=2))
    assert _named(two["action"]) == _batch(PROFILE, BILLING)
    three = state(reply=_reply(PROFILE, BILLING, {"name": "search_policy", "args": {}}))
    over = validate(three, deps=deps(max_parallel_calls=2))
    assert over["stop_reason"] == "invalid_action:multiple_actions"
    assert "3 tool calls in one reply; 2 are allowed" in over["message"]
    one = validate(state(reply=_reply(PROFILE, BILLING)), deps=deps())
    assert "one is allowed" in one["message"]


def test_the_gate_admits_every_call_with_its_own_key_and_counts_each() -> None:
    update = gate(state(action=_batch(PROFILE, BILLING), usage={"steps": 2}), CONFIG, deps=deps())
    assert [c["tool"] for c in update["calls"]] == ["get_user_profile", "get_user_billing"]
    keys = [c["key"] for c in update["calls"]]
    assert keys[0] == idempotency_key("t1", 2, "get_user_profile", {"user_id": 42})
    assert keys[1] == idempotency_key("t1", 2, "get_user_billing", {"user_id": 42}, 1)
    assert update["usage"]["tool_calls"] == 2
    assert update["usage"]["per_tool"] == {"get_user_profile": 1, "get_user_billing": 1}
    assert len(update["seen"]) == 2


@pytest.mark.parametrize(
    ("calls", "fields", "reason"),
    [
        ((PROFILE, {"name": "delete_account", "args": {}}), {}, "tool_missing:delete_account"),
        ((PROFILE, BILLING), {"max_tool_calls": 1}, "max_tool_calls"),
        (
            (PROFILE, {**PROFILE, "args": {"user_id": 7}}),
            {"tool_limits": {"get_user_profile": 1}},
            "tool_limit:get_user_profile",
        ),
        ((PROFILE, PROFILE), {}, "loop_detected"),
        (
            (PROFILE, BILLING),
            {"allow": frozenset({"get_user_profile"})},
            "tool_denied:get_user_billing",
        ),
    ],
)
def test_if_any_call_would_stop_the_run_none_runs(
    calls: tuple[dict[str, Any], ...], fields: dict[str, Any], reason: str
) -> None:
    update = gate(state(action=_batch(*calls)), CONFIG, deps=deps(**fields))
    assert update["stop_reason"] == reason
    assert "calls" not in update
    assert "usage" not in update  # nothing was counted: nothing runs
    assert [entry["stop_reason"] for entry in update["trace"]] == [reason]


def test_in_observe_mode_a_refused_call_is_its_own_observation_and_the_others_run() -> None:
    batch = _batch({"name": "delete_account", "args": {}}, PROFILE)
    parts = deps(on_tool_error="observe")
    gated = gate(state(action=batch), CONFIG, deps=parts)
    refused, allowed = gated["calls"]
    assert refused["outcome"]["error"] == "tool_missing:delete_account"
    assert allowed["outcome"] is None
    ran = execute(state(calls=gated["calls"]), CONFIG, deps=parts)
    assert ran["calls"][0] == refused
    assert ran["calls"][1]["outcome"]["ok"] is True
    seen = observe(state(calls=ran["calls"]), deps=parts)
    assert [t.get("error") for t in seen["trace"]] == ["tool_missing:delete_account", None]
    assert [h["action"]["name"] for h in seen["history"]] == ["delete_account", "get_user_profile"]


MEETING = threading.Barrier(2)


@tool
def meet_a(x: int) -> str:
    """Returns only once meet_b is running too."""
    MEETING.wait(timeout=PATIENCE)
    return "a"


@tool
def meet_b(x: int) -> str:
    """Returns only once meet_a is running too."""
    MEETING.wait(timeout=PATIENCE)
    return "b"


@pytest.mark.parametrize("body", ["sync", "async"])
def test_allowed_calls_run_at_the_same_time(body: str) -> None:
    """Each tool waits for the other: run one after the other, both would time out."""
    MEETING.reset()
    parts = deps(tools=[meet_a, meet_b], tool_timeout_seconds=10)
    calls = [
        {"step": 1, "tool": "meet_a", "args": {"x": 1}, "key": "k0"},
        {"step": 1, "tool": "meet_b", "args": {"x": 2}, "key": "k1"},
    ]
    current = admitted(parts, state(calls=calls), CONFIG)
    ran = (
        execute(current, CONFIG, deps=parts)
        if body == "sync"
        else asyncio.run(aexecute(current, CONFIG, deps=parts))
    )
    assert [c["outcome"]["observation"] for c in ran["calls"]] == ["a", "b"]
    assert "stop_reason" not in ran


def test_the_first_failed_call_stops_the_run_and_the_others_are_kept() -> None:
    calls = [
        {"step": 1, "tool": "get_user_profile", "args": {"user_id": 42}, "key": "k0"},
        {"step": 1, "tool": "get_user_billing", "args": {"user_id": "x"}, "key": "k1"},
    ]
    parts = deps(tools=SUPPORT_TOOLS)
    ran = execute(admitted(parts, state(calls=calls), CONFIG), CONFIG, deps=parts)
    assert ran["stop_reason"] == "tool_bad_args:get_user_billing"
    seen = observe(state(calls=ran["calls"], stop_reason=ran["stop_reason"]), deps=parts)
    assert [t["tool"] for t in seen["trace"]] == ["get_user_billing"]  # the other never ran
    assert seen["trace"][-1]["stop_reason"] == "tool_bad_args:get_user_billing"


def test_a_resumed_batch_reruns_only_what_is_safe_to_repeat(tmp_path: Path) -> None:
    """A process died running a batch the gate had counted (both calls in ``action`` and
    ``seen``): on resume, one of them is not safe to run again, so neither runs."""
    file = str(tmp_path / "out.txt")
    args = [{"path": file, "text": "r"}, {"path": file, "text": "a"}]
    tools = ["record_line", "append_line"]
    calls = [
        {"step": 1, "tool": t, "args": a, "key": f"k{i}", "id": f"c{i}"}
        for i, (t, a) in enumerate(zip(tools, args, strict=True))
    ]
    proposed = [{"name": c["tool"], "args": c["args"], "id": c["id"]} for c in calls]
    crashed = state(
        action={"kind": "tools", "calls": proposed},
        calls=calls,
        seen=[loop_key(t, a) for t, a in zip(tools, args, strict=True)],
        usage={"steps": 1, "tool_calls": 2, "per_tool": dict.fromkeys(tools, 1)},
    )
    parts = deps(tools=[record_line, append_line], max_parallel_calls=2)
    resumed: Any = {"configurable": {CONFIG_KEY_RESUMING: True}}
    ran = execute(crashed, resumed, deps=parts)
    assert ran["stop_reason"] == "tool_outcome_unknown:append_line"
    assert lines(Path(file)) == []  # neither ran: the run stops before the batch runs again


def test_the_refund_scenario_needs_one_model_call_less_with_parallel_calls() -> None:
    both = AIMessage(
        "",
        tool_calls=[{**PROFILE, "id": "1"}, {**BILLING, "id": "2"}],
    )
    search = AIMessage(
        "", tool_calls=[{"name": "search_policy", "args": {"query": "refund"}, "id": "3"}]
    )
    model = ScriptedChatModel(replies=[both, search, "Yes: USD 49."])
    graph = build_graph(model, SUPPORT_TOOLS, policy=Policy(max_parallel_calls=2))
    out = graph.invoke({"goal": REFUND_GOAL})
    assert out["stop_reason"] == "success"
    assert len(model.requests) == 3  # 4 with one call per reply: one model call saved
    assert [h["step"] for h in out["history"]] == [1, 1, 2]
    second = model.requests[1]
    assert [m.type for m in second[2:]] == ["ai", "tool", "tool"]  # one turn, two results


def test_a_crash_in_the_middle_of_a_batch_repeats_no_side_effect(tmp_path: Path) -> None:
    file = str(tmp_path / "out.txt")

    @tool
    def pay_and_crash(path: str) -> str:
        """Appends a payment line, then the process dies before the outcome is stored."""
        with open(path, "a", encoding="utf-8") as out:
            out.write("paid\n")
        raise KeyboardInterrupt("simulated crash")

    batch = AIMessage(
        "",
        tool_calls=[
            {"name": "record_line", "args": {"path": file, "text": "r"}, "id": "1"},
            {"name": "pay_and_crash", "args": {"path": file}, "id": "2"},
        ],
    )
    model = ScriptedChatModel(replies=[batch, "done"])
    graph = build_graph(
        model,
        [record_line, pay_and_crash],
        policy=Policy(max_parallel_calls=2),
        checkpointer=InMemorySaver(),
    )
    with pytest.raises(KeyboardInterrupt):
        run(graph, "pay", thread_id="t")
    out = resume(graph, "t")
    assert out["stop_reason"] == "tool_outcome_unknown:pay_and_crash"
    assert lines(Path(file)).count("paid") == 1


_TWO_REPLIES = {
    "tools": _reply(PROFILE, BILLING),
    "json": {"text": json.dumps([{"kind": "tool", **PROFILE}, {"kind": "tool", **BILLING}])},
    "text": {
        "text": 'Thought: both\nAction: get_user_profile\nAction Input: {"user_id": 42}\n'
        'Action: get_user_billing\nAction Input: {"user_id": 42}'
    },
}


@pytest.mark.parametrize("protocol", list(_TWO_REPLIES))
def test_more_calls_than_allowed_is_multiple_actions_in_every_protocol(protocol: str) -> None:
    """A JSON list of two actions once ran both under the default max_parallel_calls=1."""
    reply = _TWO_REPLIES[protocol]
    over = validate(state(reply=reply), deps=deps(protocol=protocol))
    assert over["stop_reason"] == "invalid_action:multiple_actions"
    assert "2 tool calls in one reply; one is allowed" in over["message"]
    two = validate(state(reply=reply), deps=deps(protocol=protocol, max_parallel_calls=2))
    assert _named(two["action"]) == _batch(PROFILE, BILLING)


def test_a_json_list_of_two_actions_runs_no_tool_under_the_default() -> None:
    text = json.dumps([{"kind": "tool", **PROFILE}, {"kind": "tool", **BILLING}])
    out = scripted_run([text], protocol="json")
    assert out["stop_reason"] == "invalid_action:multiple_actions"
    assert out["history"] == []
    assert out["trace"] == []
    assert out["usage"]["tool_calls"] == 0
