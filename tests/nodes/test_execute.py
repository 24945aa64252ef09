"""execute on hand-built state: argument checks, timeouts, errors, retries, keys, resume safety."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

import pytest
from langchain_core.tools import InjectedToolArg, ToolException, tool
from pydantic import BaseModel, field_validator

from gated_react._engine.call_keys import loop_key
from gated_react._engine.langgraph_internals import CONFIG_KEY_RESUMING
from gated_react.nodes.execute import aexecute, execute
from gated_react.state import State
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.fakes import FLAKY, SENT, broken, flaky, send_email, slow
from ..support.helpers import admitted, deps, state

TOOLS = [*SUPPORT_TOOLS, send_email, slow, broken, flaky]


def _run(tool_name: str, args: dict[str, Any], config: Any = None, **fields: Any) -> dict[str, Any]:
    call = {"step": 1, "tool": tool_name, "args": args, "key": "k" * 24}
    parts = deps(tools=TOOLS, **fields)
    return execute(admitted(parts, state(calls=[call]), config), config or {}, deps=parts)


def test_success_records_a_json_observation_and_time() -> None:
    update = _run("get_user_profile", {"user_id": 42})
    assert update["calls"][0]["outcome"] == {
        "ok": True,
        "observation": {"user": {"id": 42, "name": "Anna", "country": "US", "tier": "pro"}},
        "error": None,
        "by_human": False,
        "content": None,
        "artifact": None,
    }
    assert update["usage"]["seconds"] >= 0
    assert "stop_reason" not in update


@pytest.mark.parametrize(
    "args",
    [{"user_id": "forty-two"}, {}, {"user_id": 42, "admin": True}, {"user_id": -1}],
)
def test_bad_args_stop_before_the_tool_runs(args: dict[str, Any]) -> None:
    update = _run("get_user_profile", args)
    assert update["stop_reason"] == "tool_bad_args:get_user_profile"
    assert update["calls"][0]["outcome"]["ok"] is False


def test_field_validators_of_the_argument_model_count_as_bad_args() -> None:
    class Amount(BaseModel):
        cents: int
        idempotency_key: Annotated[str, InjectedToolArg] = ""

        @field_validator("cents")
        @classmethod
        def _positive(cls, value: int) -> int:
            if value <= 0:
                raise ValueError("must be positive")
            return value

    @tool(args_schema=Amount)
    def refund(cents: int, idempotency_key: str = "") -> str:
        """Refund an amount."""
        return f"refunded {cents}"

    call = {"step": 1, "tool": "refund", "args": {"cents": -5}, "key": "k"}
    parts = deps(tools=[refund])
    update = execute(admitted(parts, state(calls=[call])), {}, deps=parts)
    assert update["stop_reason"] == "tool_bad_args:refund"
    assert "must be positive" in update["message"]
    call = {"step": 1, "tool": "refund", "args": {"cents": 5}, "key": "k"}
    assert execute(admitted(parts, state(calls=[call])), {}, deps=parts)["calls"][0]["outcome"][
        "ok"
    ]


def test_timeout_and_error() -> None:
    started = time.monotonic()
    timed_out = _run("slow", {"seconds": 5}, tool_timeouts={"slow": 0.2})
    assert time.monotonic() - started < 3
    assert timed_out["stop_reason"] == "tool_timeout:slow"
    failed = _run("broken", {})
    assert failed["stop_reason"] == "tool_error:broken"
    assert "disk on fire" in failed["message"]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


@tool
def leaky() -> str:
    """Fails with a connection string in its message."""
    raise ConnectionError("cannot reach postgresql://app:hunter2@db:5432/shop")


@tool
def unprintable() -> str:
    """Fails with an exception that cannot be printed."""
    raise Unprintable


def test_tool_errors_are_one_line_without_secrets() -> None:
    leaked = execute(
        admitted(
            parts := deps(tools=[leaky]),
            state(calls=[{"step": 1, "tool": "leaky", "args": {}, "key": "k"}]),
        ),
        {},
        deps=parts,
    )
    assert leaked["stop_reason"] == "tool_error:leaky"
    assert "hunter2" not in leaked["message"]
    assert "hunter2" not in str(leaked["calls"][0]["outcome"])
    shown = execute(
        admitted(
            parts := deps(tools=[unprintable]),
            state(calls=[{"step": 1, "tool": "unprintable", "args": {}, "key": "k"}]),
        ),
        {},
        deps=parts,
    )
    assert shown["message"] == "unprintable failed: Unprintable: (message cannot be shown)"


def test_observe_mode_keeps_going_with_the_error_as_observation() -> None:
    update = _run("broken", {}, on_tool_error="observe")
    assert "stop_reason" not in update
    outcome = update["calls"][0]["outcome"]
    assert outcome["error"] == "tool_error:broken"
    assert "disk on fire" in outcome["observation"]


def test_idempotent_tools_are_retried_and_others_are_not() -> None:
    FLAKY.clear()
    assert _run("flaky", {}, tool_retries=2)["calls"][0]["outcome"]["observation"] == "finally"
    FLAKY.clear()
    assert _run("flaky", {}, tool_retries=1)["stop_reason"] == "tool_error:flaky"


def test_the_idempotency_key_reaches_tools_that_declare_it() -> None:
    SENT.clear()
    _run("send_email", {"to": "anna@example.com"})
    assert SENT == [{"to": "anna@example.com", "key": "k" * 24}]


def _crashed(tool_name: str, args: dict[str, Any]) -> State:
    """The state a process left when it died in execute: the gate had counted the reply's call
    (its id in ``action``, its loop key in ``seen``) and nothing observed it."""
    call = {"step": 1, "tool": tool_name, "args": args, "key": "k" * 24, "id": "c1"}
    return state(
        action={"kind": "tool", "name": tool_name, "args": args, "id": "c1"},
        calls=[call],
        seen=[loop_key(tool_name, args)],
        usage={"steps": 1, "tool_calls": 1, "per_tool": {tool_name: 1}},
    )


def test_on_resume_a_non_idempotent_call_is_not_run_again() -> None:
    SENT.clear()
    resumed = {"configurable": {CONFIG_KEY_RESUMING: True}}
    parts = deps(tools=TOOLS)
    update = execute(_crashed("send_email", {"to": "anna@example.com"}), resumed, deps=parts)
    assert update["stop_reason"] == "tool_outcome_unknown:send_email"
    assert SENT == []
    again = execute(_crashed("get_user_profile", {"user_id": 42}), resumed, deps=parts)
    assert again["calls"][0]["outcome"]["ok"] is True
    assert "seen" not in again  # counted by the gate already: not recorded twice


def test_a_step_the_gate_just_admitted_has_not_run_whoever_continues_it() -> None:
    """Held before execute (interrupt_before) and continued in the same process: the gate's
    admission proves nothing ran yet, so the call runs, once, unasked again."""
    SENT.clear()
    update = _run(
        "send_email", {"to": "anna@example.com"}, {"configurable": {CONFIG_KEY_RESUMING: True}}
    )
    assert "stop_reason" not in update
    assert SENT == [{"to": "anna@example.com", "key": "k" * 24}]


def test_long_output_is_cut_with_a_marker() -> None:
    @tool
    def big() -> str:
        """Returns a lot."""
        return "x" * 50_000

    call = {"step": 1, "tool": "big", "args": {}, "key": "k"}
    parts = deps(tools=[big], max_observation_chars=1000)
    update = execute(admitted(parts, state(calls=[call])), {}, deps=parts)
    observation = update["calls"][0]["outcome"]["observation"]
    assert observation.startswith("x" * 1000)
    assert "[cut: 50000 chars, first 1000 shown]" in observation


def test_async_body_times_out_sync_and_async_tools() -> None:
    @tool
    async def slow_async(seconds: float) -> str:
        """Async sleep."""
        await asyncio.sleep(seconds)
        return "woke"

    parts = deps(tools=[slow, slow_async], tool_timeout_seconds=0.2)
    for name in ("slow", "slow_async"):
        call = {"step": 1, "tool": name, "args": {"seconds": 5}, "key": "k"}
        update = asyncio.run(aexecute(admitted(parts, state(calls=[call])), {}, deps=parts))
        assert update["stop_reason"] == f"tool_timeout:{name}"
    call = {"step": 1, "tool": "slow_async", "args": {"seconds": 0}, "key": "k"}
    assert asyncio.run(aexecute(admitted(parts, state(calls=[call])), {}, deps=parts))["calls"][0][
        "outcome"
    ]["ok"]


def test_a_tool_that_exits_fails_the_call_not_the_process() -> None:
    @tool
    def quitter() -> str:
        """Calls sys.exit."""
        raise SystemExit(3)

    @tool
    async def aquitter() -> str:
        """Calls sys.exit, asynchronously."""
        raise SystemExit(4)

    parts = deps(tools=[quitter, aquitter])
    for name in ("quitter", "aquitter"):
        call = {"step": 1, "tool": name, "args": {}, "key": "k"}
        sync = execute(admitted(parts, state(calls=[call])), {}, deps=parts)
        assert sync["stop_reason"] == f"tool_error:{name}"
        assert "SystemExit" in sync["message"]
    # Under ainvoke a sync tool runs on a thread, where its exit is contained too. (An async
    # tool's SystemExit leaves the event loop from LangChain's own task: asyncio's rule.)
    call = {"step": 1, "tool": "quitter", "args": {}, "key": "k"}
    assert asyncio.run(aexecute(admitted(parts, state(calls=[call])), {}, deps=parts))[
        "stop_reason"
    ] == ("tool_error:quitter")


def test_a_returned_exception_object_is_a_value_not_an_error() -> None:
    @tool
    def describe() -> ValueError:
        """Returns an exception object as data."""
        return ValueError("just data")

    call = {"step": 1, "tool": "describe", "args": {}, "key": "k"}
    parts = deps(tools=[describe])
    update = execute(admitted(parts, state(calls=[call])), {}, deps=parts)
    assert update["calls"][0]["outcome"]["ok"] is True
    assert "just data" in str(update["calls"][0]["outcome"]["observation"])


@tool
def handled(x: int) -> str:
    """Fails, and says so as LangChain's handle_tool_error does."""
    raise ToolException(f"no record {x}")


handled.handle_tool_error = True


@pytest.mark.parametrize("mode", ["stop", "observe"])
def test_an_error_the_tool_handled_is_an_error(mode: str) -> None:
    """Before: a ``ToolException`` under ``handle_tool_error`` (a ToolMessage with status
    "error") was recorded as a success, and never stopped a run under ``on_tool_error="stop"``
    (found by a tester moving a create_agent app). The model is shown the tool's own words."""
    call = {"step": 1, "tool": "handled", "args": {"x": 3}, "key": "k" * 24}
    parts = deps(tools=[handled], on_tool_error=mode)
    update = execute(admitted(parts, state(calls=[call])), {}, deps=parts)
    outcome = update["calls"][0]["outcome"]
    assert (outcome["ok"], outcome["observation"]) == (False, "no record 3")
    assert outcome["error"] == "tool_error:handled"
    assert update.get("stop_reason") == ("tool_error:handled" if mode == "stop" else None)
