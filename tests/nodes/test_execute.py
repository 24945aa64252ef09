"""execute on hand-built state, each call under the gate's permit: argument checks, timeouts,
errors, retries, keys, and what the run-once record says after a crash."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Annotated, Any

import pytest
from langchain_core.tools import BaseTool, InjectedToolArg, StructuredTool, ToolException, tool
from pydantic import BaseModel, field_validator

from gated_react._engine import deadline
from gated_react._engine.authority.ledger import ledger_for
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.authority.waiting import Running
from gated_react._engine.execution import tool_runner
from gated_react._engine.langgraph_internals import CONFIG_KEY_CHECKPOINTER
from gated_react.nodes.execute import aexecute, execute
from gated_react.nodes.gate import gate
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.fakes import FLAKY, SENT, broken, flaky, send_email, slow
from ..support.helpers import QUESTION_ID, as_another_process, deps, state
from ..support.reaping import PATIENCE
from .hand import THREAD, applied, ending, kinds, proposal, records, saved, usage

TOOLS = [*SUPPORT_TOOLS, send_email, slow, broken, flaky]


def _gated(
    tool_name: str,
    args: dict[str, Any],
    tools: list[BaseTool] = TOOLS,
    saver: Any = None,
    **fields: Any,
) -> tuple[dict[str, Any], Any, Any]:
    """The state after the gate let ``tool_name(args)`` through, its config and deps."""
    parts, config = deps(tools=tools, **fields), saved(saver)
    asked = proposal((tool_name, args))
    current = state(messages=[asked["message"]], calls=asked["calls"])
    after = applied(current, gate(current, config, deps=parts))
    assert ending(after) is None, after
    return after, config, parts


def _run(
    tool_name: str, args: dict[str, Any], tools: list[BaseTool] = TOOLS, **fields: Any
) -> dict[str, Any]:
    """execute's update for a call the gate let through."""
    after, config, parts = _gated(tool_name, args, tools, **fields)
    return execute(after, config, deps=parts)


def _outcome(update: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = update["step"]["calls"][0]["outcome"]
    return found


def test_success_answers_the_call_and_records_what_it_returned_and_its_time() -> None:
    after, config, parts = _gated("get_user_profile", {"user_id": 42})
    update = execute(after, config, deps=parts)
    shown = '{"user": {"id": 42, "name": "Anna", "country": "US", "tier": "pro"}}'
    assert _outcome(update) == {"ok": True, "text": ""}  # the text is the conversation's
    (message,) = update["messages"]
    assert (message.tool_call_id, message.status, message.text) == ("c1", "success", shown)
    assert ending(update) is None
    done = records(config)[-1]
    assert (done.kind, done.body["ok"], done.body["shown"]) == ("done", True, shown)
    assert usage(config).seconds == done.body["seconds"] >= 0


@pytest.mark.parametrize(
    "args",
    [{"user_id": "forty-two"}, {}, {"user_id": 42, "admin": True}, {"user_id": -1}],
)
def test_bad_args_stop_before_the_tool_runs(args: dict[str, Any]) -> None:
    update = _run("get_user_profile", args)
    assert ending(update)["reason"] == "tool_bad_args:get_user_profile"
    assert update["messages"] == []


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

    update = _run("refund", {"cents": -5}, [refund])
    assert ending(update)["reason"] == "tool_bad_args:refund"
    assert "must be positive" in ending(update)["message"]
    assert _outcome(_run("refund", {"cents": 5}, [refund]))["ok"]


def test_timeout_and_error() -> None:
    started = time.monotonic()
    timed_out = _run("slow", {"seconds": 5}, tool_timeouts={"slow": 0.2})
    assert time.monotonic() - started < 3
    assert ending(timed_out)["reason"] == "tool_timeout:slow"
    failed = _run("broken", {})
    assert ending(failed)["reason"] == "tool_error:broken"
    assert "disk on fire" in ending(failed)["message"]


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
    after, config, parts = _gated("leaky", {}, [leaky])
    leaked = execute(after, config, deps=parts)
    assert ending(leaked)["reason"] == "tool_error:leaky"
    assert "hunter2" not in ending(leaked)["message"]
    assert "hunter2" not in str(leaked["messages"]) + str(records(config))
    shown = _run("unprintable", {}, [unprintable])
    assert ending(shown)["message"] == "unprintable failed: Unprintable: (message cannot be shown)"


def test_observe_mode_keeps_going_with_the_error_shown_to_the_model() -> None:
    update = _run("broken", {}, on_tool_error="observe")
    assert ending(update) is None
    assert _outcome(update)["ok"] is False
    (message,) = update["messages"]
    assert message.status == "error"
    assert "disk on fire" in message.text


def test_idempotent_tools_are_retried_and_others_are_not() -> None:
    FLAKY.clear()
    assert _run("flaky", {}, tool_retries=2)["messages"][0].text == "finally"
    FLAKY.clear()
    assert ending(_run("flaky", {}, tool_retries=1))["reason"] == "tool_error:flaky"


def test_the_idempotency_key_reaches_tools_that_declare_it() -> None:
    after, config, parts = _gated("send_email", {"to": "anna@example.com"})
    execute(after, config, deps=parts)
    assert [{"to": "anna@example.com", "key": after["step"]["calls"][0]["key"]}] == SENT
    assert kinds(config) == ["permit", "started", "done"]  # claimed before it ran, closed after


def _claimed(config: Any, call: dict[str, Any]) -> None:
    """The ``started`` record a process writes just before it runs a call that is not
    idempotent (and then dies, before its ``done``)."""
    ledger = ledger_for(config["configurable"][CONFIG_KEY_CHECKPOINTER])
    body = {"call": call["id"], "tool": call["tool"]}
    assert ledger.claim(Record(THREAD, QUESTION_ID, Kind.STARTED, call["key"], body))


def test_after_a_crash_inside_a_call_a_non_idempotent_one_is_not_run_again() -> None:
    after, config, parts = _gated("send_email", {"to": "anna@example.com"})
    _claimed(config, after["step"]["calls"][0])
    update = execute(after, config, deps=parts)
    assert ending(update)["reason"] == "tool_outcome_unknown:send_email"
    assert "may already have run" in ending(update)["message"]
    assert SENT == []
    again, config, parts = _gated("get_user_profile", {"user_id": 42})
    _claimed(config, again["step"]["calls"][0])  # a tool that is idempotent is run again
    assert _outcome(execute(again, config, deps=parts))["ok"] is True


def test_a_crash_inside_a_call_is_found_by_another_process(store: Any) -> None:
    """The record is in the run's own database: a process that continues the thread finds the
    call started (its permit, signed with the dead process's key, no longer verifies: the
    gate's checks run again, and the record still holds the call back)."""
    after, config, parts = _gated("send_email", {"to": "anna@example.com"}, saver=store)
    _claimed(config, after["step"]["calls"][0])
    as_another_process()
    update = execute(after, config, deps=parts)
    assert SENT == []
    assert ending(update)["reason"] == "tool_outcome_unknown:send_email"


def test_a_call_found_done_is_answered_from_the_record_not_run_again() -> None:
    """The step replayed after its call finished (a crash before its checkpoint, a replay, a
    fork): the model is shown what the call returned, and it does not run again."""
    after, config, parts = _gated("send_email", {"to": "anna@example.com"})
    first = execute(after, config, deps=parts)
    again = execute(after, config, deps=parts)
    assert len(SENT) == 1
    assert again["messages"][0].text == first["messages"][0].text == "sent to anna@example.com"
    assert ending(again) is None


@pytest.mark.parametrize("another_process", [False, True])
def test_a_step_the_gate_just_admitted_has_not_run_whoever_continues_it(
    store: Any, another_process: bool
) -> None:
    """Held before execute (interrupt_before) and continued, here or in a process that cannot
    check the permit's signature (which goes through the gate's checks again): the record says
    nothing started, so the call runs, once, unasked."""
    after, config, parts = _gated("send_email", {"to": "anna@example.com"}, saver=store)
    if another_process:
        as_another_process()
    update = execute(after, config, deps=parts)
    assert ending(update) is None
    assert [{"to": "anna@example.com", "key": after["step"]["calls"][0]["key"]}] == SENT


def test_long_output_is_cut_with_a_marker() -> None:
    @tool
    def big() -> str:
        """Returns a lot."""
        return "x" * 50_000

    shown = _run("big", {}, [big], max_observation_chars=1000)["messages"][0].text
    assert shown.startswith("x" * 1000)
    assert "[cut: 50000 chars, first 1000 shown]" in shown


def test_async_body_times_out_sync_and_async_tools() -> None:
    @tool
    async def slow_async(seconds: float) -> str:
        """Async sleep."""
        await asyncio.sleep(seconds)
        return "woke"

    for name in ("slow", "slow_async"):
        after, config, parts = _gated(
            name, {"seconds": 5}, [slow, slow_async], tool_timeout_seconds=0.2
        )
        update = asyncio.run(aexecute(after, config, deps=parts))
        assert ending(update)["reason"] == f"tool_timeout:{name}"
    after, config, parts = _gated("slow_async", {"seconds": 0}, [slow, slow_async])
    assert _outcome(asyncio.run(aexecute(after, config, deps=parts)))["ok"]


def test_a_tool_that_exits_fails_the_call_not_the_process() -> None:
    @tool
    def quitter() -> str:
        """Calls sys.exit."""
        raise SystemExit(3)

    @tool
    async def aquitter() -> str:
        """Calls sys.exit, asynchronously."""
        raise SystemExit(4)

    for name in ("quitter", "aquitter"):
        sync = _run(name, {}, [quitter, aquitter])
        assert ending(sync)["reason"] == f"tool_error:{name}"
        assert "SystemExit" in ending(sync)["message"]
    # Under ainvoke a sync tool runs on a thread, where its exit is contained too. (An async
    # tool's SystemExit leaves the event loop from LangChain's own task: asyncio's rule.)
    after, config, parts = _gated("quitter", {}, [quitter, aquitter])
    assert ending(asyncio.run(aexecute(after, config, deps=parts)))["reason"] == (
        "tool_error:quitter"
    )


def test_a_returned_exception_object_is_a_value_not_an_error() -> None:
    @tool
    def describe() -> ValueError:
        """Returns an exception object as data."""
        return ValueError("just data")

    update = _run("describe", {}, [describe])
    assert _outcome(update)["ok"] is True
    assert "just data" in update["messages"][0].text


@tool
def handled(x: int) -> str:
    """Fails, and says so as LangChain's handle_tool_error does."""
    raise ToolException(f"no record {x}")


handled.handle_tool_error = True


@pytest.mark.parametrize("mode", ["stop", "observe"])
def test_an_error_the_tool_handled_is_an_error_result(mode: str) -> None:
    """Before: a ``ToolException`` under ``handle_tool_error`` (a ToolMessage with status
    "error") was recorded as a success (found by a tester moving a create_agent app). It is
    an error result, the tool's own words, shown to the model as ``create_agent`` shows it;
    ``on_tool_error`` is for the failures nobody handled, so the run goes on either way."""
    update = _run("handled", {"x": 3}, [handled], on_tool_error=mode)
    assert _outcome(update)["ok"] is False
    (message,) = update["messages"]
    assert (message.status, message.text) == ("error", "no record 3")
    assert ending(update) is None


@pytest.mark.parametrize("body", ["sync", "async"])
@pytest.mark.parametrize("native", [False, True], ids=["sync tool", "async tool"])
def test_a_long_tool_call_is_counted_while_it_runs(
    body: str, native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a call's seconds were in its ``done`` record only, so a process killed during
    a long call left them uncounted. Now a ``running`` record says how long it has taken every
    beat, and its ``done`` record replaces those seconds (they are not counted twice)."""
    monkeypatch.setattr(deadline, "BEAT_SECONDS", 0.01)
    beats, released, seen = [], threading.Event(), []
    beat = Running.beat

    def counted(running: Running) -> None:
        beat(running)
        beats.append(1)
        if len(beats) == 2:
            released.set()

    async def acounted(running: Running) -> None:
        counted(running)

    monkeypatch.setattr(Running, "beat", counted)
    monkeypatch.setattr(Running, "abeat", acounted)

    def wait() -> str:
        released.wait(PATIENCE)
        seen.append(usage(config))  # what a process killed now would have left
        return "waited"

    async def await_() -> str:
        return await asyncio.get_running_loop().run_in_executor(None, wait)

    waits = StructuredTool.from_function(func=wait, coroutine=await_ if native else None,
                                         name="waits", description="Waits.")  # fmt: skip
    after, config, parts = _gated("waits", {}, [waits], max_seconds=60.0)
    update = (
        execute(after, config, deps=parts)
        if body == "sync"
        else asyncio.run(aexecute(after, config, deps=parts))
    )
    assert _outcome(update)["ok"]
    (while_running,) = seen
    assert while_running.seconds > 0  # it was 0.0 until the call returned
    assert kinds(config)[-3:] == ["running", "running", "done"]
    (done,) = [r for r in records(config) if r.kind is Kind.DONE]
    assert usage(config).seconds == pytest.approx(done.body["seconds"])  # not counted twice
    beaten = {r.body["attempt"] for r in records(config) if r.kind is Kind.RUNNING}
    assert beaten == {done.body["attempt"]}  # the run its beats were of


def test_a_tool_call_cut_off_by_ctrl_c_keeps_its_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: Ctrl-C (or SIGTERM) in the first second of a tool call left none of its seconds
    (no beat yet, no ``done``). Now the interrupted wait records them as it leaves."""
    began, release = threading.Event(), threading.Event()

    def waits() -> str:
        began.set()
        release.wait(PATIENCE)
        return "late"

    def interrupted(call: Any, seconds: float, beat: Any = None, later: Any = None) -> Any:
        deadline._start(call, lambda: None)
        began.wait(PATIENCE)  # the tool is running when the user presses Ctrl-C
        raise KeyboardInterrupt

    tool_ = StructuredTool.from_function(func=waits, name="waits", description="Waits.")
    after, config, parts = _gated("waits", {}, [tool_], max_seconds=60.0)
    monkeypatch.setattr(tool_runner, "call_within", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            execute(after, config, deps=parts)
    finally:
        release.set()
    assert usage(config).seconds > 0  # it was 0.0
    assert kinds(config)[-1] == "running"


def test_a_call_let_through_does_not_run_once_the_time_is_spent() -> None:
    """Before: a run killed again and again inside an idempotent call was resumed into the
    call each time (its permit holds), past ``max_seconds`` (53 s of 20 after four kills and a
    resume). Now a call does not start once the run's time is spent: it stops (or asks, under
    ``on_budget="ask"``, as the gate asks)."""
    after, config, parts = _gated("get_user_profile", {"user_id": 42}, max_seconds=20.0)
    (permit,) = [r for r in records(config) if r.kind is Kind.PERMIT]
    beat = {"call": permit.body["call"], "tool": "get_user_profile", "seconds": 21.0}
    killed = Record(THREAD, QUESTION_ID, Kind.RUNNING, permit.key, beat | {"attempt": "a"})
    ledger_for(config["configurable"][CONFIG_KEY_CHECKPOINTER]).append([killed])
    update = execute(after, config, deps=parts)
    assert ending(update)["reason"] == "max_seconds"
    assert "21.00 active seconds spent" in ending(update)["message"]
    assert kinds(config)[-1] == "running"  # nothing ran: no done record
