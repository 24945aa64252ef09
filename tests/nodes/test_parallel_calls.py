"""Gated parallel calls (``Policy.max_parallel_calls``): validate takes up to N calls from one
reply; the gate checks every call before any runs, and writes a permit for each; execute runs
the permitted ones at once, each with its own key; a crash mid-batch repeats no side effect."""

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

from gated_react import Policy, build_graph, result_of, resume, run
from gated_react._engine.authority import audit
from gated_react._engine.authority.ledger import ledger_for
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.langgraph_internals import CONFIG_KEY_CHECKPOINTER
from gated_react.nodes.execute import aexecute, execute
from gated_react.nodes.gate import gate
from gated_react.nodes.validate import validate
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import QUESTION_ID, REFUND_GOAL, deps, state
from ..support.helpers import run as scripted_run
from ..support.reaping import PATIENCE
from ..support.scenarios import append_line, lines, record_line
from .hand import THREAD, applied, ending, kinds, proposal, ran, records, saved, trace, usage

PROFILE = ("get_user_profile", {"user_id": 42})
BILLING = ("get_user_billing", {"user_id": 42})


def _reply(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"text": "", "tool_calls": [{"name": n, "args": a} for n, a in calls]}


def _called(update: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["tool"], c["args"]) for c in update["step"]["calls"]]


def _gated(*calls: tuple[str, dict[str, Any]], config: Any = None, **fields: Any) -> Any:
    """The state after the gate took ``calls`` as one reply; its config and deps."""
    config, parts = config or saved(), deps(**fields)
    asked = proposal(*calls)
    current = state(messages=[asked["message"]], calls=asked["calls"])
    return applied(current, gate(current, config, deps=parts)), config, parts


def test_validate_takes_up_to_max_parallel_calls_from_one_reply() -> None:
    two = validate(state(reply=_reply(PROFILE, BILLING)), deps=deps(max_parallel_calls=2))
    assert _called(two) == [PROFILE, BILLING]
    assert len({c["id"] for c in two["step"]["calls"]}) == 2
    three = state(reply=_reply(PROFILE, BILLING, ("search_policy", {})))
    over = ending(validate(three, deps=deps(max_parallel_calls=2)))
    assert over["reason"] == "invalid_action:multiple_actions"
    assert "3 tool calls in one reply; 2 are allowed" in over["message"]
    one = ending(validate(state(reply=_reply(PROFILE, BILLING)), deps=deps()))
    assert "one is allowed" in one["message"]


def test_the_gate_admits_every_call_with_a_permit_and_a_key_of_its_own() -> None:
    after, config, _ = _gated(PROFILE, BILLING)
    keys = [c["key"] for c in after["step"]["calls"]]
    assert len(set(keys)) == 2
    assert all(len(k) == 24 for k in keys)
    assert [(r.kind, r.key) for r in records(config)] == [("permit", k) for k in keys]
    spent = usage(config)
    assert spent.tool_calls == 2
    assert spent.per_tool == {"get_user_profile": 1, "get_user_billing": 1}


@pytest.mark.parametrize(
    ("calls", "fields", "reason"),
    [
        ((PROFILE, ("delete_account", {})), {}, "tool_missing:delete_account"),
        ((PROFILE, BILLING), {"max_tool_calls": 1}, "max_tool_calls"),
        (
            (PROFILE, ("get_user_profile", {"user_id": 7})),
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
    calls: tuple[tuple[str, dict[str, Any]], ...], fields: dict[str, Any], reason: str
) -> None:
    config = saved()
    asked = proposal(*calls)
    after = ran(state(messages=[asked["message"]], calls=asked["calls"]), config, deps(**fields))
    assert after["stop_reason"] == reason
    assert "permit" not in kinds(config)  # nothing was let through: nothing runs
    assert usage(config).tool_calls == 0
    assert [entry.get("stop_reason") for entry in trace(config)] == [reason]
    assert [m.response_metadata for m in after["messages"] if m.type == "tool"] == [
        {"not_run": True}
    ] * len(calls)


def test_in_observe_mode_a_refused_call_is_its_own_observation_and_the_others_run() -> None:
    after, config, parts = _gated(("delete_account", {}), PROFILE, on_tool_error="observe")
    refused, allowed = after["step"]["calls"]
    assert refused["shown"]["error"] == "tool_missing:delete_account"
    assert "shown" not in allowed
    done = applied(after, execute(after, config, deps=parts))
    assert [c["outcome"]["ok"] for c in done["step"]["calls"]] == [False, True]
    assert [t.get("error") for t in trace(config)] == ["tool_missing:delete_account", None]
    history = audit.history(done["messages"])
    assert [h.action.name for h in history] == ["delete_account", "get_user_profile"]


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
    fields = {"tools": [meet_a, meet_b], "tool_timeout_seconds": 10, "max_parallel_calls": 2}
    after, config, parts = _gated(("meet_a", {"x": 1}), ("meet_b", {"x": 2}), **fields)
    done = (
        execute(after, config, deps=parts)
        if body == "sync"
        else asyncio.run(aexecute(after, config, deps=parts))
    )
    assert [m.text for m in done["messages"]] == ["a", "b"]
    assert ending(done) is None


def test_the_first_failed_call_stops_the_step_and_the_trace_says_what_ran() -> None:
    config = saved()
    bad = ("get_user_billing", {"user_id": "x"})
    asked = proposal(PROFILE, bad)
    after = ran(state(messages=[asked["message"]], calls=asked["calls"]), config, deps())
    assert after["stop_reason"] == "tool_bad_args:get_user_billing"
    assert "done" not in kinds(config)  # checked whole before any runs: nothing ran
    traced = {t["tool"]: t for t in trace(config)}
    assert traced["get_user_billing"]["stop_reason"] == "tool_bad_args:get_user_billing"
    assert traced.get("get_user_profile", {"ok": False})["ok"] is False  # it never ran


def test_a_resumed_batch_reruns_only_what_is_safe_to_repeat(tmp_path: Path) -> None:
    """A process died running a batch the gate had let through, inside the call that is not
    idempotent (its ``started`` record written, no ``done``): on resume it is not safe to
    run again, so neither runs."""
    file = str(tmp_path / "out.txt")
    calls = (
        ("record_line", {"path": file, "text": "r"}),
        ("append_line", {"path": file, "text": "a"}),
    )
    fields = {"tools": [record_line, append_line], "max_parallel_calls": 2}
    after, config, parts = _gated(*calls, **fields)
    appending = after["step"]["calls"][1]
    ledger = ledger_for(config["configurable"][CONFIG_KEY_CHECKPOINTER])
    body = {"call": appending["id"], "tool": "append_line"}
    assert ledger.claim(Record(THREAD, QUESTION_ID, Kind.STARTED, appending["key"], body))
    done = execute(after, config, deps=parts)
    assert ending(done)["reason"] == "tool_outcome_unknown:append_line"
    assert lines(Path(file)) == []  # neither ran: the run stops before the batch runs again


def test_the_refund_scenario_needs_one_model_call_less_with_parallel_calls() -> None:
    both = AIMessage(
        "",
        tool_calls=[
            {"name": PROFILE[0], "args": PROFILE[1], "id": "1"},
            {"name": BILLING[0], "args": BILLING[1], "id": "2"},
        ],
    )
    search = AIMessage(
        "", tool_calls=[{"name": "search_policy", "args": {"query": "refund"}, "id": "3"}]
    )
    model = ScriptedChatModel(replies=[both, search, "Yes: USD 49."])
    graph = build_graph(model, SUPPORT_TOOLS, policy=Policy(max_parallel_calls=2))
    out = result_of(graph, graph.invoke({"goal": REFUND_GOAL}))
    assert out["stop_reason"] == "success"
    assert len(model.requests) == 3  # 4 with one call per reply: one model call saved
    assert [h["step"] for h in out["history"]] == [1, 1, 2]
    second = model.requests[1]
    assert [m.type for m in second[-3:]] == ["ai", "tool", "tool"]  # one turn, two results


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
    "json": {
        "text": json.dumps([{"kind": "tool", "name": n, "args": a} for n, a in (PROFILE, BILLING)])
    },
    "text": {
        "text": 'Thought: both\nAction: get_user_profile\nAction Input: {"user_id": 42}\n'
        'Action: get_user_billing\nAction Input: {"user_id": 42}'
    },
}


@pytest.mark.parametrize("protocol", list(_TWO_REPLIES))
def test_more_calls_than_allowed_is_multiple_actions_in_every_protocol(protocol: str) -> None:
    """A JSON list of two actions once ran both under the default max_parallel_calls=1."""
    reply = _TWO_REPLIES[protocol]
    over = ending(validate(state(reply=reply), deps=deps(protocol=protocol)))
    assert over["reason"] == "invalid_action:multiple_actions"
    assert "2 tool calls in one reply; one is allowed" in over["message"]
    two = validate(state(reply=reply), deps=deps(protocol=protocol, max_parallel_calls=2))
    assert _called(two) == [PROFILE, BILLING]


def test_a_json_list_of_two_actions_runs_no_tool_under_the_default() -> None:
    text = json.dumps([{"kind": "tool", "name": n, "args": a} for n, a in (PROFILE, BILLING)])
    out = scripted_run([text], protocol="json")
    assert out["stop_reason"] == "invalid_action:multiple_actions"
    assert out["history"] == []
    assert out["trace"] == []
    assert out["usage"]["tool_calls"] == 0
