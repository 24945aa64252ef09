"""gate on hand-built state: each check in its documented order, each call it lets through a
permit in the run's record (counted there, never in a channel), each refusal shown to the model a
``refused`` record that counts too."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool

from gated_react._engine.execution.call_keys import args_hash
from gated_react.nodes.execute import execute
from gated_react.nodes.gate import gate
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import deps, state
from .hand import applied, ending, kinds, proposal, ran, records, saved, step_messages, usage


@tool
def unused(x: int) -> int:
    """Registered but not allowed."""
    return x


def _gate(
    name: str,
    args: dict[str, Any] | None = None,
    before: Any = (),
    config: Any = None,
    **fields: Any,
) -> tuple[dict[str, Any], Any]:
    """The state after the gate let ``name(args)`` through (or stopped), proposed after the
    earlier steps ``before`` (each a tuple of step_messages' arguments); and its config."""
    config = config or saved()
    parts = deps(tools=[*SUPPORT_TOOLS, unused], **fields)
    earlier = [m for i, step in enumerate(before) for m in step_messages(*step, call=f"e{i}")]
    asked = proposal((name, args or {}))
    current = state(messages=[*earlier, asked["message"]], calls=asked["calls"])
    return applied(current, gate(current, config, deps=parts)), config


def _spent(config: Any, *calls: tuple[str, dict[str, Any]]) -> Any:
    """``calls`` let through and run in the run of ``config``, one step each."""
    parts = deps(tools=[*SUPPORT_TOOLS, unused], loop_detection="off")
    for i, call in enumerate(calls):
        asked = proposal(call, first=100 + i)
        ran(state(messages=[asked["message"]], calls=asked["calls"]), config, parts)
    return config


def test_an_allowed_call_gets_a_permit_and_a_stable_key_before_it_runs() -> None:
    first, config = _gate("get_user_profile", {"user_id": 42})
    again, _ = _gate("get_user_profile", {"user_id": 42})  # another thread's record, same run
    (call,) = first["step"]["calls"]
    assert (call["tool"], call["args"], len(call["key"])) == (
        "get_user_profile",
        {"user_id": 42},
        24,
    )
    assert call["key"] == again["step"]["calls"][0]["key"]
    assert "outcome" not in call
    assert ending(first) is None
    (permit,) = records(config)
    assert (permit.kind, permit.key, permit.verified) == ("permit", call["key"], True)
    assert permit.body["tool"] == "get_user_profile"
    assert permit.body["args"] == '{"user_id":42}'
    assert permit.body["rule"] == "allow"
    assert usage(config).tool_calls == 1  # counted from the record


def test_budget_is_checked_first() -> None:
    config = _spent(saved(), ("search_policy", {"query": "1"}), ("search_policy", {"query": "2"}))
    after, _ = _gate("no_such_tool", config=config, max_tool_calls=2)
    assert ending(after) == {
        "reason": "max_tool_calls",
        "message": "max_tool_calls 2 reached (3 requested)",
        "call": "c1",
        "step": 1,  # the branch's first step (its one AI message with calls)
    }
    assert kinds(config).count("permit") == 2  # nothing was let through


def test_per_tool_limit() -> None:
    config = _spent(saved(), ("search_policy", {"query": "a"}))
    after, _ = _gate(
        "search_policy", {"query": "b"}, config=config, tool_limits={"search_policy": 1}
    )
    assert ending(after)["reason"] == "tool_limit:search_policy"


def test_missing_before_denied_and_denied_by_default() -> None:
    assert ending(_gate("nope")[0])["reason"] == "tool_missing:nope"
    narrowed = frozenset({"get_user_profile"})
    assert ending(_gate("unused", {"x": 1}, allow=narrowed)[0])["reason"] == "tool_denied:unused"
    denied = _gate("search_policy", {"query": "x"}, allow=narrowed)
    assert ending(denied[0])["reason"] == "tool_denied:search_policy"
    assert records(denied[1]) == []  # a stop lets nothing through


def test_loop_detected_in_exact_and_normalized_modes() -> None:
    before = [("search_policy", {"query": "Refund policy"})]
    same = ("search_policy", {"query": "Refund policy"})
    spaced = ("search_policy", {"query": "  refund   POLICY"})
    assert ending(_gate(*same, before)[0])["reason"] == "loop_detected"
    assert ending(_gate(*spaced, before)[0]) is None
    assert (
        ending(_gate(*spaced, before, loop_detection="normalized")[0])["reason"] == "loop_detected"
    )
    assert ending(_gate(*same, before, loop_detection="off")[0]) is None


def test_observe_mode_turns_refusals_into_what_the_model_is_shown() -> None:
    after, config = _gate("nope", on_tool_error="observe", allow=frozenset({"get_user_profile"}))
    assert ending(after) is None
    (call,) = after["step"]["calls"]
    assert call["shown"] == {
        "text": "there is no tool named 'nope'. Tools you may call: ['get_user_profile']",
        "error": "tool_missing:nope",
        "by_human": False,
    }
    assert kinds(config) == ["refused"]
    assert usage(config).tool_calls == 1  # a refusal shown to the model counts as a call
    answered = execute(after, config, deps=deps(on_tool_error="observe"))
    (message,) = answered["messages"]
    assert (message.status, message.text) == ("error", call["shown"]["text"])
    assert "unused" not in message.text


def test_observe_mode_still_stops_on_budgets_and_loops() -> None:
    before = [("search_policy", {"query": "x"})]
    loop = _gate("search_policy", {"query": "x"}, before, on_tool_error="observe")
    assert ending(loop[0])["reason"] == "loop_detected"
    config = _spent(saved(), ("search_policy", {"query": "x"}))
    over = _gate("nope", config=config, on_tool_error="observe", max_tool_calls=1)
    assert ending(over[0])["reason"] == "max_tool_calls"


def test_observe_mode_repeating_a_refused_call_is_a_loop() -> None:
    parts = deps(on_tool_error="observe")
    config = saved()
    asked = proposal(("nope", {"a": 1}))
    first = ran(state(messages=[asked["message"]], calls=asked["calls"]), config, parts)
    assert ending(first) is None
    again = proposal(("nope", {"a": 1}), first=2)
    repeated = state(messages=[*first["messages"][1:], again["message"]], calls=again["calls"])
    assert (
        ending(applied(repeated, gate(repeated, config, deps=parts)))["reason"] == "loop_detected"
    )
    other = proposal(("nope", {"a": 2}), first=2)
    fresh = state(messages=[*first["messages"][1:], other["message"]], calls=other["calls"])
    assert ending(applied(fresh, gate(fresh, config, deps=parts))) is None


def test_refusals_say_why_in_the_message() -> None:
    missing = ending(_gate("nope", {"a": 1})[0])
    assert missing["message"] == "there is no tool named 'nope'"
    denied = _gate("unused", {"x": 1}, allow=frozenset({"get_user_profile"}))
    assert ending(denied[0])["message"] == "the policy does not allow 'unused'"


def test_a_loop_stop_names_the_tool_and_traces_the_refused_call() -> None:
    from gated_react.nodes.stop import stop

    from .hand import trace

    after, config = _gate("search_policy", {"query": "x"}, [("search_policy", {"query": "x"})])
    assert ending(after)["message"] == (
        "search_policy was already called with the same arguments in this run"
    )
    stop(after, config)
    assert [{k: v for k, v in t.items() if k != "step"} for t in trace(config)] == [
        {
            "tool": "search_policy",
            "args_hash": args_hash({"query": "x"}),
            "ok": False,
            "stop_reason": "loop_detected",
        }
    ]


def test_a_run_without_a_checkpointer_still_gets_a_stable_key() -> None:
    """Each invocation of a graph without one is a run of its own (``<question>#<nonce>``):
    its calls are keyed within it."""
    asked = proposal(("get_user_profile", {"user_id": 42}))
    current = state(messages=[asked["message"]], calls=asked["calls"], run="q-1#a")
    keys = [gate(current, {}, deps=deps())["step"]["calls"][0]["key"] for _ in range(2)]
    other = state(messages=[asked["message"]], calls=asked["calls"], run="q-1#b")
    assert keys[0] == keys[1] != gate(other, {}, deps=deps())["step"]["calls"][0]["key"]


def test_observe_mode_loops_follow_the_policys_loop_mode() -> None:
    before = [("nope", {"q": "A"}, "there is no tool named 'nope'")]
    for mode, reason in (("off", None), ("exact", None), ("normalized", "loop_detected")):
        after, _ = _gate("nope", {"q": " a "}, before, on_tool_error="observe", loop_detection=mode)
        assert (ending(after) or {}).get("reason") == reason, mode
    looped, _ = _gate("nope", {"q": "A"}, before, on_tool_error="observe")
    assert (
        ending(looped)["message"] == "nope was already called with the same arguments in this run"
    )


def test_a_repeat_gets_the_reminders_the_policy_allows_then_stops() -> None:
    once = [("get_user_profile", {"user_id": 42})]
    config = _spent(saved(), ("get_user_profile", {"user_id": 42}))
    reminded, _ = _gate("get_user_profile", {"user_id": 42}, once, config, repeat_reminders=1)
    (shown,) = reminded["step"]["calls"]
    assert shown["shown"] == {
        "text": "You already called get_user_profile with these arguments, and its result is "
        "above in this conversation: use it, call something else, or give your final answer. "
        "Calling it again ends the run.",
        "error": "loop_detected",
        "by_human": False,
    }
    assert kinds(config) == ["permit", "done", "refused"]  # no permit: nothing runs
    assert usage(config).tool_calls == 2  # a reminder counts as a call
    twice = [*once, ("get_user_profile", {"user_id": 42})]
    assert ending(_gate("get_user_profile", {"user_id": 42}, twice, repeat_reminders=1)[0])[
        "reason"
    ] == ("loop_detected")
    assert ending(_gate("get_user_profile", {"user_id": 42}, once)[0])["reason"] == "loop_detected"
