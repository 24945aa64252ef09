"""decide on hand-built state: bounded prompt, every model call paid in the run's record, and
model failures as stop reasons."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from gated_react._engine import deadline
from gated_react._engine.authority.ledger import ledger_for
from gated_react._engine.authority.paying import Meter
from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.conversation.chat import call_id
from gated_react._engine.conversation.transcript import build_messages
from gated_react._engine.langgraph_internals import CONFIG_KEY_CHECKPOINTER
from gated_react.errors import Unrecorded
from gated_react.nodes.decide import adecide, decide
from gated_react.state import Usage
from gated_react.testing import ScriptedChatModel

from ..support.fakes import HangingChatModel
from ..support.helpers import deps, node_deps, policy, state
from ..support.reaping import PATIENCE
from .hand import ending, kinds, paid_steps, records, saved, step_messages, usage


def test_the_model_gets_the_transcript_and_the_record_counts_the_step() -> None:
    parts = deps(["ok"], context_steps=4, context_keep=1, max_steps=20)
    earlier = [
        m
        for i in range(1, 11)
        for m in step_messages("search_policy", {"query": f"q{i}"}, f"obs {i}", call=f"e{i}")
    ]
    hand_built = state(messages=earlier)
    config = saved()
    paid_steps(config, 10)
    update = decide(hand_built, config, deps=parts)
    sent = parts.model.requests[0]  # type: ignore[attr-defined]
    assert sent == build_messages(
        hand_built["messages"], 0, parts.system, parts.policy, parts.protocol.replay
    )
    (asked,) = [m for m in sent if m.type == "human"]
    assert asked.content.startswith("User 42")
    assert "Earlier steps" in asked.content  # 10 steps, at most 4 in full: folded
    assert kinds(config)[-2:] == ["model", "paid"]  # recorded before the call, paid after
    assert usage(config).steps == 11
    assert usage(config).tokens > 100
    assert update["step"]["reply"]["text"] == "ok"
    assert "messages" not in update  # a final answer is finish's to write


def test_reply_keeps_tool_calls_and_joins_the_conversation_with_them() -> None:
    message = AIMessage(
        "",
        tool_calls=[{"name": "get_user_profile", "args": {"user_id": 42}, "id": "1"}],
        usage_metadata={"input_tokens": 7, "output_tokens": 3, "total_tokens": 10},
    )
    parts = deps([lambda _: message])
    update = decide(state(), saved(), deps=parts)
    assert update["step"]["reply"]["tool_calls"] == [
        {"name": "get_user_profile", "args": {"user_id": 42}, "id": "1"}  # the model's id, kept
    ]
    (said,) = update["messages"]
    assert [c["id"] for c in said.tool_calls] == ["1"]
    assert said.id == update["step"]["reply"]["id"]


@pytest.mark.parametrize("text", ["Let me think...", "Anna, pro."], ids=["garbage", "answer"])
def test_a_new_reply_keeps_none_of_the_step_befores_calls(text: str) -> None:
    """The calls in hand are the reply's, named by validate: a reply after a tool step that
    validate rejects (a retry) must not leave the gate the calls of the step before."""
    before = {"id": "c0", "tool": "get_user_profile", "args": {"user_id": 42}, "key": "k" * 24}
    earlier = step_messages("get_user_profile", {"user_id": 42}, '{"name": "Anna"}')
    update = decide(state(messages=earlier, calls=[before]), saved(), deps=deps([text]))
    assert update["step"]["reply"]["text"] == text
    assert update["step"]["calls"] == []


def test_tool_calls_join_the_conversation_under_their_ids() -> None:
    """The AI message of the step holds every call, with the text the model wrote with them
    and the model's own ids (made up, stable, where it gave none), as create_agent's model node
    writes it: a call the gate pauses on is the last message, so a chat client draws its
    approval panel in any turn."""
    message = AIMessage(
        "Let me look that up.",
        id="reply-1",
        tool_calls=[
            {"name": "get_user_profile", "args": {"user_id": 42}, "id": "call_abc"},
            {"name": "get_user_billing", "args": {"user_id": 42}, "id": None},
        ],
    )
    update = decide(state(), saved(), deps=deps([lambda _: message], max_parallel_calls=2))
    (said,) = update["messages"]
    assert (said.type, said.id, said.text) == ("ai", "reply-1", "Let me look that up.")
    ids = [c["id"] for c in said.tool_calls]
    assert ids == ["call_abc", call_id("reply-1", 1)]
    assert len(ids[1]) <= 40  # OpenAI's limit on a tool call id


def test_a_json_reply_is_a_call_with_no_protocol_text_in_the_conversation() -> None:
    text = '{"kind": "tool", "name": "get_user_profile", "args": {"user_id": 1}}'
    message = AIMessage(text, id="r")
    (said,) = decide(state(), saved(), deps=deps([lambda _: message], protocol="json"))["messages"]
    assert said.text == ""
    assert said.tool_calls[0]["id"] == call_id("r", 0)


@pytest.mark.parametrize(
    ("error", "reason", "steps"),
    [  # a reply lost on its way back is paid (its estimate), but no decision: no step
        (TimeoutError("slow"), "llm_timeout", 2),
        (httpx.ReadTimeout("read timed out"), "llm_timeout", 2),
        (ValueError("boom"), "llm_error:ValueError", 3),
    ],
)
def test_model_failure_is_a_stop_reason_not_an_exception(
    error: Exception, reason: str, steps: int
) -> None:
    config = saved()
    paid_steps(config, 2, seconds=1.0)
    update = decide(state(), config, deps=deps([error], model_retries=0))
    assert ending(update)["reason"] == reason
    assert ending(update)["message"]
    assert usage(config).steps == steps
    assert usage(config).tokens > 20  # the failed call is paid, at its estimate
    assert usage(config).seconds >= 1.0


def test_a_reply_lost_on_the_last_step_is_retried_not_a_policy_stop() -> None:
    """A dropped connection on a run's last step: the retry is sent (the lost attempt made no
    decision) and the step is the one decision the budget allows."""
    config = saved()
    paid_steps(config, 2)
    lost = httpx.RemoteProtocolError("Server disconnected without sending a response.")
    update = decide(state(), config, deps=deps([lost, "the answer"], max_steps=3))
    assert "ending" not in update["step"] or update["step"]["ending"] is None
    assert update["step"]["reply"]["text"] == "the answer"
    assert usage(config).steps == 3


def test_async_body_gives_the_same_update() -> None:
    sync = decide(state(), saved(), deps=deps(["same"]))["step"]
    async_ = asyncio.run(adecide(state(), saved(), deps=deps(["same"])))["step"]
    assert sync["reply"].pop("id") != async_["reply"].pop("id")  # each call's own message id
    assert sync == async_


def test_retry_adds_a_format_reminder() -> None:
    parts = deps(["again"], protocol="text")
    retry = {"why": "no_action", "message": "no Action line", "count": 1}
    decide(state(retry=retry), saved(), deps=parts)
    last = parts.model.requests[0][-1]  # type: ignore[attr-defined]
    assert "no_action" in last.content
    assert "format" in last.content


@pytest.mark.parametrize("retried", [False, True], ids=["alone", "under ModelRetryMiddleware"])
@pytest.mark.parametrize("body", ["sync", "async"])
def test_a_hung_model_ends_the_run_when_the_time_budget_runs_out(body: str, retried: bool) -> None:
    from langchain.agents.middleware import ModelRetryMiddleware

    model = HangingChatModel()
    retry = [ModelRetryMiddleware(max_retries=5, initial_delay=0.0)] if retried else []
    parts = node_deps(model, [], policy(max_seconds=5.0), retry)  # retries share the budget
    config = saved()
    paid_steps(config, 1, seconds=4.5)
    started = time.monotonic()
    try:
        if body == "sync":
            update = decide(state(), config, deps=parts)
        else:
            update = asyncio.run(adecide(state(), config, deps=parts))
    finally:
        model.release.set()
    assert time.monotonic() - started < 10  # a guard: the model would hang for 60 s
    assert ending(update)["reason"] == "max_seconds"
    assert "while waiting for the model" in ending(update)["message"]
    assert usage(config).steps == 2
    assert "reply" not in update["step"]


def test_a_run_with_no_seconds_left_does_not_call_the_model() -> None:
    parts = deps(["never"], max_seconds=5.0)
    config = saved()
    paid_steps(config, 1, seconds=5.0)
    update = decide(state(), config, deps=parts)
    assert ending(update)["reason"] == "max_seconds"
    assert parts.model.requests == []  # type: ignore[attr-defined]
    assert kinds(config) == ["paid"]  # nothing recorded: no call was made


def test_a_reply_middleware_made_is_the_reply_the_model_spent_counted() -> None:
    from langchain.agents.middleware import after_model

    @after_model
    def shout(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(last.text.upper(), id=last.id)]}  # no token counts

    counts: list[tuple[int, int]] = []
    for middleware in ([], [shout]):
        parts = node_deps(ScriptedChatModel(replies=["quiet"]), [], policy(), middleware)
        config = saved()
        update = decide(state(), config, deps=parts)
        spent = usage(config)
        counts.append((spent.input_tokens, spent.output_tokens))
    assert update["step"]["reply"]["text"] == "QUIET"
    assert counts[0] == counts[1]  # what the model reported, not the rewritten message
    assert counts[1][0] > 0


class _SlowModel(HangingChatModel):
    """A reply that comes only after the run has recorded ``beats`` beats of the wait; what the
    run's record said of the call just before it returned is kept (``spent``): what a process
    killed then would have left."""

    beats: int = 2
    config: Any = None
    spent: list[Usage] = Field(default_factory=list)

    def _generate(self, messages: Any, stop: Any = None, **kwargs: Any) -> ChatResult:
        self.release.wait(PATIENCE)
        self.spent.append(usage(self.config))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="late"))])

    async def _agenerate(self, messages: Any, stop: Any = None, **kwargs: Any) -> ChatResult:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: self._generate(messages))


@pytest.mark.parametrize("body", ["sync", "async"])
def test_a_long_model_call_is_counted_while_it_runs(
    body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a call's seconds were recorded only when it ended, so a process killed during a
    long model call left them uncounted, and killing and resuming again and again never spent
    ``max_seconds``. Now the record says how long the call has taken every beat."""
    monkeypatch.setattr(deadline, "BEAT_SECONDS", 0.01)
    config = saved()
    model = _SlowModel(config=config)
    beat, beats = Meter.beat, []

    def counted(meter: Meter) -> None:
        before = len(records(config))
        beat(meter)
        if len(records(config)) > before:  # a beat before the call's thread began records none
            beats.append(1)
        if len(beats) == model.beats:
            model.release.set()

    async def acounted(meter: Meter) -> None:
        counted(meter)

    monkeypatch.setattr(Meter, "beat", counted)
    monkeypatch.setattr(Meter, "abeat", acounted)
    parts = node_deps(model, [], policy(max_seconds=60.0))
    if body == "sync":
        update = decide(state(), config, deps=parts)
    else:
        update = asyncio.run(adecide(state(), config, deps=parts))
    assert update["step"]["reply"]["text"] == "late"
    (while_waiting,) = model.spent
    assert while_waiting.steps == 1
    assert while_waiting.seconds > 0  # counted before any reply (it was 0.0)
    *waiting, last = kinds(config)  # the call's record and a beat each
    assert (len(waiting) >= 3, set(waiting), last) == (True, {"model"}, "paid")
    paid = records(config)[-1]
    assert usage(config).seconds == paid.body["seconds"]  # the paid record settles it


@pytest.mark.parametrize(("max_seconds", "counted"), [(60.0, 1.0), (0.5, 0.5)])
def test_a_model_call_killed_before_its_first_beat_counts_up_to_it(
    max_seconds: float, counted: float
) -> None:
    """Before: the record said nothing of a call's seconds until its first beat, so a process
    killed within a second of each call's start left every such second free (only
    ``max_steps`` bounded a run killed and resumed that way). Now a call under way counts up
    to its next beat (or the deadline, if sooner) until its ``paid`` record settles it."""
    config = saved()
    model = _SlowModel(config=config)
    model.release.set()  # it answers at once: before any beat
    parts = node_deps(model, [], policy(max_seconds=max_seconds))
    decide(state(), config, deps=parts)
    (while_waiting,) = model.spent
    assert while_waiting.seconds == pytest.approx(counted, abs=0.1)
    assert usage(config).seconds < while_waiting.seconds  # settled: what the call took


def test_no_model_request_goes_out_with_a_sliver_of_the_runs_time_left() -> None:
    """Before: after kills had spent all but 0.9 ms of the budget, the next decision still sent
    the model a request (paid, and cut off at once). Now less than ``LEAST_SECONDS`` left is
    time spent: the run stops before any request."""
    model = ScriptedChatModel(replies=["never sent"])
    parts = node_deps(model, [], policy(max_seconds=5.0))
    config = saved()
    paid_steps(config, 1, seconds=5.0 - 0.0009)
    update = decide(state(), config, deps=parts)
    assert ending(update)["reason"] == "max_seconds"
    assert model.requests == []


@pytest.mark.parametrize("body", ["sync", "async"])
def test_a_model_call_whose_time_the_store_cannot_record_is_abandoned(
    body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a beat the store could not take was skipped and the model call went on, so a
    cut database connection let it run unrecorded (14 s of model time under an 8 s budget).
    Now the wait ends at the first beat that cannot be written, as a crash would end it."""
    monkeypatch.setattr(deadline, "BEAT_SECONDS", 0.01)
    config = saved()
    model = HangingChatModel()
    ledger = ledger_for(config["configurable"][CONFIG_KEY_CHECKPOINTER])
    append, aappend, models = ledger.append, ledger.aappend, []

    def cut(more: list[Record]) -> list[Record]:  # the call's own record goes; its beats do not
        models.extend(r for r in more if r.kind is Kind.MODEL)
        if len(models) > 1:
            raise OSError("server closed the connection unexpectedly")
        return more

    async def acut(more: list[Record]) -> None:
        await aappend(cut(more))

    monkeypatch.setattr(ledger, "append", lambda more: append(cut(more)))
    monkeypatch.setattr(ledger, "aappend", acut)
    parts = node_deps(model, [], policy(max_seconds=60.0))
    decided = (
        (lambda: decide(state(), config, deps=parts))
        if body == "sync"
        else (lambda: asyncio.run(adecide(state(), config, deps=parts)))
    )
    try:
        with pytest.raises(Unrecorded, match="could not record how long the model call"):
            decided()
        assert not model.release.is_set()  # it did not wait for the reply
    finally:
        model.release.set()


class _Began(HangingChatModel):
    """A model server that accepted the request (``began``) and never answers."""

    began: threading.Event = Field(default_factory=threading.Event)

    def _generate(self, messages: Any, stop: Any = None, **kwargs: Any) -> ChatResult:
        self.began.set()
        return super()._generate(messages, stop, **kwargs)


def test_a_model_call_cut_off_by_ctrl_c_keeps_its_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: Ctrl-C (or SIGTERM, which the CLI turns into it) in the first second of a call
    left none of its seconds: the waiting thread was interrupted before any beat, and the
    call's thread never wrote its end. Now the interrupted wait records them as it leaves, to
    the moment: it counted a second more (the beat's count ahead, 1.56 s for 0.56 s)."""
    config = saved()
    model = _Began()
    began = time.monotonic()

    def interrupted(call: Any, seconds: float, beat: Any = None) -> Any:
        deadline._start(call, lambda: None)
        model.began.wait(PATIENCE)  # the call is under way when the user presses Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr("gated_react.nodes.decide.call_within", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            decide(state(), config, deps=node_deps(model, [], policy(max_seconds=60.0)))
    finally:
        model.release.set()
    took = time.monotonic() - began
    assert 0 < usage(config).seconds <= took  # it was 0.0, then the second ahead too
    assert usage(config).steps == 1
