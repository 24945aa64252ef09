"""gate on hand-built state: each check in its documented order."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool

from gated_react._engine.call_keys import args_hash, idempotency_key, loop_key
from gated_react.nodes.gate import gate
from gated_react.state import ToolAction
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import deps, history_entry, logs, state

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


@tool
def unused(x: int) -> int:
    """Registered but not allowed."""
    return x


def _gate(
    action: dict[str, Any], history: list[dict[str, Any]] | None = None, **fields: Any
) -> dict[str, Any]:
    parts = deps(tools=[*SUPPORT_TOOLS, unused], **fields)
    current = state(action={"kind": "tool", **action}, **logs(history or [], steps=3))
    return gate(current, CONFIG, deps=parts)


def test_allowed_call_is_recorded_with_a_stable_key_before_it_runs() -> None:
    first = _gate({"name": "get_user_profile", "args": {"user_id": 42}})
    again = _gate({"name": "get_user_profile", "args": {"user_id": 42}})
    call = first["calls"][0]
    assert call["tool"] == "get_user_profile"
    assert call["step"] == 3
    assert call["outcome"] is None
    assert len(call["key"]) == 24
    assert call["key"] == again["calls"][0]["key"]
    assert "stop_reason" not in first


def test_budget_is_checked_first() -> None:
    history = [history_entry(i, "search_policy", query=str(i)) for i in range(1, 3)]
    update = _gate({"name": "no_such_tool"}, history, max_tool_calls=2)
    assert update["stop_reason"] == "max_tool_calls"
    assert update["message"] == "max_tool_calls 2 reached (3 requested)"
    assert update["trace"][0]["ok"] is False
    assert update["trace"][0]["stop_reason"] == "max_tool_calls"


def test_per_tool_limit() -> None:
    history = [history_entry(1, "search_policy", query="a")]
    update = _gate(
        {"name": "search_policy", "args": {"query": "b"}}, history, tool_limits={"search_policy": 1}
    )
    assert update["stop_reason"] == "tool_limit:search_policy"


def test_missing_before_denied_and_denied_by_default() -> None:
    assert _gate({"name": "nope"})["stop_reason"] == "tool_missing:nope"
    narrowed = frozenset({"get_user_profile"})
    assert _gate({"name": "unused"}, allow=narrowed)["stop_reason"] == "tool_denied:unused"
    assert (
        _gate({"name": "search_policy"}, allow=narrowed)["stop_reason"]
        == "tool_denied:search_policy"
    )


def test_loop_detected_in_exact_and_normalized_modes() -> None:
    history = [history_entry(1, "search_policy", query="Refund policy")]
    same = {"name": "search_policy", "args": {"query": "Refund policy"}}
    spaced = {"name": "search_policy", "args": {"query": "  refund   POLICY"}}
    assert _gate(same, history)["stop_reason"] == "loop_detected"
    assert "stop_reason" not in _gate(spaced, history)
    assert _gate(spaced, history, loop_detection="normalized")["stop_reason"] == "loop_detected"
    assert "stop_reason" not in _gate(same, history, loop_detection="off")


def test_observe_mode_turns_refusals_into_observations_naming_allowed_tools() -> None:
    update = _gate({"name": "nope"}, on_tool_error="observe", allow=frozenset({"get_user_profile"}))
    assert "stop_reason" not in update
    outcome = update["calls"][0]["outcome"]
    assert outcome["ok"] is False
    assert outcome["error"] == "tool_missing:nope"
    assert "get_user_profile" in outcome["observation"]
    assert "unused" not in outcome["observation"]


def test_observe_mode_still_stops_on_budgets_and_loops() -> None:
    history = [history_entry(1, "search_policy", query="x")]
    loop = _gate(
        {"name": "search_policy", "args": {"query": "x"}}, history, on_tool_error="observe"
    )
    assert loop["stop_reason"] == "loop_detected"
    over = _gate({"name": "nope"}, history, on_tool_error="observe", max_tool_calls=1)
    assert over["stop_reason"] == "max_tool_calls"


def test_observe_mode_repeating_a_refused_call_is_a_loop() -> None:
    first = _gate({"name": "nope", "args": {"a": 1}}, [], on_tool_error="observe")
    assert "stop_reason" not in first
    again = state(
        action={"kind": "tool", "name": "nope", "args": {"a": 1}},
        seen=first["seen"],
        usage=first["usage"],
    )
    update = gate(again, {}, deps=deps(on_tool_error="observe"))
    assert update["stop_reason"] == "loop_detected"
    other = again.model_copy(update={"action": ToolAction(name="nope", args={"a": 2})})
    assert "stop_reason" not in gate(other, {}, deps=deps(on_tool_error="observe"))


def test_refusals_say_why_in_the_message() -> None:
    missing = _gate({"name": "nope", "args": {"a": 1}})
    assert missing["message"] == "there is no tool named 'nope'"
    assert missing["trace"][0]["args_hash"] == args_hash({"a": 1})
    denied = _gate({"name": "unused", "args": {"x": 1}}, allow=frozenset({"get_user_profile"}))
    assert denied["message"] == "the policy does not allow 'unused'"


def test_a_loop_stop_names_the_tool_and_traces_the_refused_call() -> None:
    history = [history_entry(1, "search_policy", query="x")]
    update = _gate({"name": "search_policy", "args": {"query": "x"}}, history)
    assert update["message"] == (
        "search_policy was already called with the same arguments in this run"
    )
    assert update["trace"] == [
        {
            "step": 3,
            "tool": "search_policy",
            "args_hash": args_hash({"query": "x"}),
            "ok": False,
            "stop_reason": "loop_detected",
        }
    ]


def test_a_run_without_a_thread_id_still_gets_a_stable_key() -> None:
    current = state(action={"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}})
    update = gate(current, {}, deps=deps())
    assert update["calls"][0]["key"] == idempotency_key("-", 0, "get_user_profile", {"user_id": 42})


def test_observe_mode_shows_the_refusal_without_a_key() -> None:
    update = _gate({"name": "nope"}, on_tool_error="observe", allow=frozenset({"get_user_profile"}))
    assert update["calls"][0]["key"] == ""
    assert update["calls"][0]["outcome"]["observation"] == (
        "there is no tool named 'nope'. Tools you may call: ['get_user_profile']"
    )
    assert update["usage"]["tool_calls"] == 1  # a refusal shown to the model counts


def test_observe_mode_loops_follow_the_policys_loop_mode() -> None:
    refused = {"name": "nope", "args": {"q": "A"}}
    first = _gate(refused, on_tool_error="observe")
    seen = {"seen": first["seen"], "usage": first["usage"]}
    again = {"name": "nope", "args": {"q": " a "}}
    for mode, reason in (("off", None), ("exact", None), ("normalized", "loop_detected")):
        update = gate(
            state(action={"kind": "tool", **again}, **seen),
            CONFIG,
            deps=deps(on_tool_error="observe", loop_detection=mode),
        )
        assert update.get("stop_reason") == reason, mode
    looped = gate(
        state(action={"kind": "tool", **refused}, **seen),
        CONFIG,
        deps=deps(on_tool_error="observe"),
    )
    assert looped["message"] == "nope was already called with the same arguments in this run"
    assert looped["trace"][0]["args_hash"] == args_hash({"q": "A"})


def test_a_repeat_gets_the_reminders_the_policy_allows_then_stops() -> None:
    call = {"name": "get_user_profile", "args": {"user_id": 42}}
    once = [history_entry(1, "get_user_profile", "ok", user_id=42)]
    reminded = _gate(call, once, repeat_reminders=1)
    (shown,) = reminded["calls"]
    assert shown["key"] == ""  # nothing runs, so nothing needs a key
    assert shown["outcome"] == {
        "ok": False,
        "observation": "You already called get_user_profile with these arguments, and its "
        "result is above in this conversation: use it, call something else, or give your final "
        "answer. Calling it again ends the run.",
        "error": "loop_detected",
        "by_human": False,
        "content": None,
        "artifact": None,
    }
    assert reminded["usage"]["tool_calls"] == 2  # a reminder counts as a call
    twice = [*once, history_entry(2, "get_user_profile", "ok", user_id=42)]
    assert _gate(call, twice, repeat_reminders=1)["stop_reason"] == "loop_detected"
    assert _gate(call, once)["stop_reason"] == "loop_detected"  # the default: no reminder


def test_the_gate_passes_over_the_record_a_fixed_number_of_times_whatever_the_calls() -> None:
    """Loop checks are lookups in the ledger's index, not a scan of the record per call."""
    from gated_react._engine.budget_checks import Limits
    from gated_react.nodes.gate import Ledger, check
    from gated_react.state import Usage

    class Passes(list[str]):
        count = 0

        def __iter__(self) -> Any:
            Passes.count += 1
            return super().__iter__()

    parts = deps(max_parallel_calls=10)
    record = Passes(loop_key("get_user_profile", {"user_id": n}) for n in range(50))
    passes = []
    for calls in (1, 8):
        Passes.count = 0
        ledger = Ledger(Usage(steps=1), record, 1, Limits(parts.policy, []))
        for n in range(calls):
            action = ToolAction(name="get_user_profile", args={"user_id": 100 + n})
            assert check(ledger, parts, CONFIG, action, n).outcome is None
        passes.append(Passes.count)
    assert passes[0] == passes[1]
