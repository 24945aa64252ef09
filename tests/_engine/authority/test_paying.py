"""Model calls paid for in the record (``Meter``): each is checked against the run's budgets
and recorded before it is made (``model``, at an estimate) and when it returns (``paid``); a
call that raised keeps its estimate; a second call a hook makes pays again, and one the budget
no longer allows is never made (``BudgetSpent``). What a reply says of its usage counts only
when it is a count."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.ai import UsageMetadata
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Price
from gated_react._engine.authority.budgets import Limits
from gated_react._engine.authority.ledger import Place
from gated_react._engine.authority.paying import NO_USAGE, BudgetSpent, Meter, spent
from gated_react._engine.langgraph_internals import CONFIG_KEY_CHECKPOINTER
from gated_react.stops import StopReason

from ...support.helpers import QUESTION_ID, deps

PRICED = {"prices": {"scripted": Price(input=1000.0, output=1000.0)}}  # 1 USD per 1,000 tokens
ASKED: list[BaseMessage] = [HumanMessage("What is the plan of user 42?")]


def _reply(input_tokens: int = 400, output_tokens: int = 100, **more: Any) -> AIMessage:
    usage = UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        **more,
    )  # type: ignore[typeddict-item]
    return AIMessage("The pro plan.", usage_metadata=usage)  # fmt: skip


def _meter(**fields: Any) -> Meter:
    parts = deps(**fields)
    config = {"configurable": {"thread_id": "t1", CONFIG_KEY_CHECKPOINTER: InMemorySaver()}}
    return Meter(Place.of(config), QUESTION_ID, parts, Limits(parts.policy, []))  # type: ignore[arg-type]


def _kinds(meter: Meter) -> list[str]:
    return [str(r.kind) for r in meter.place.ledger.book("t1", QUESTION_ID).records]


def _usage(meter: Meter) -> Any:
    return meter.place.ledger.book("t1", QUESTION_ID).tally.usage()


def test_a_call_is_recorded_before_it_is_made_and_when_it_returns() -> None:
    meter, seen = _meter(**PRICED), []

    def model() -> BaseMessage:
        seen.append(_kinds(meter))  # what the record holds while the model works
        return _reply()

    assert meter.call(model, ASKED).text == "The pro plan."
    assert seen == [["model"]]
    assert _kinds(meter) == ["model", "paid"]
    usage = _usage(meter)
    assert (usage.steps, usage.input_tokens, usage.output_tokens, usage.tokens) == (
        1,
        400,
        100,
        500,
    )
    assert usage.cost == pytest.approx(0.5)
    assert usage.estimated_tokens == 0


def test_the_first_call_is_checked_against_the_record_the_decision_read_and_later_ones_read_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A decision reads the run's record before its first call: that call does not read it a
    second time; a call a hook makes after it reads what was recorded since."""
    meter = _meter(**PRICED)
    ledger, reads = meter.place.ledger, []
    meter.read = ledger.book("t1", QUESTION_ID)
    after = ledger.backend.after
    monkeypatch.setattr(ledger.backend, "after", lambda *a: reads.append(a) or after(*a))
    meter.call(_reply, ASKED)
    assert reads == []
    meter.call(_reply, ASKED)
    assert len(reads) == 1
    assert _usage(meter).steps == 2


def test_a_call_that_raised_keeps_its_estimate() -> None:
    meter = _meter(**PRICED)

    def down() -> BaseMessage:
        raise ConnectionError("the server went away")

    with pytest.raises(ConnectionError):
        meter.call(down, ASKED)
    assert _kinds(meter) == ["model", "paid"]
    usage = _usage(meter)
    assert usage.steps == 1
    assert usage.tokens == usage.estimated_tokens > 0  # it may have been paid: never free
    assert usage.cost is not None
    assert usage.cost > 0


def test_a_second_call_over_max_cost_is_never_made() -> None:
    """A hook that calls the model again pays again, under the same budget: the first call
    spent 0.50 USD of 0.05, so the second raises before the model is asked."""
    meter, asked = _meter(max_cost=0.05, **PRICED), []

    def model() -> BaseMessage:
        asked.append(1)
        return _reply()

    meter.call(model, ASKED)
    with pytest.raises(BudgetSpent) as spent_out:
        meter.call(model, ASKED)
    assert asked == [1]
    assert spent_out.value.stop.reason is StopReason.MAX_COST
    assert "max_cost 0.05 USD reached" in str(spent_out.value)
    assert _kinds(meter) == ["model", "paid"]


def test_a_call_past_max_steps_is_never_made() -> None:
    meter, asked = _meter(max_steps=2), []

    def model() -> BaseMessage:
        asked.append(1)
        return _reply()

    meter.call(model, ASKED)
    meter.call(model, ASKED)
    with pytest.raises(BudgetSpent) as spent_out:
        meter.call(model, ASKED)
    assert spent_out.value.stop.message == "max_steps 2 reached (3 requested)"
    assert len(asked) == 2


def test_the_async_twin_records_and_refuses_alike() -> None:
    meter = _meter(max_cost=0.05, **PRICED)

    async def model() -> BaseMessage:
        return _reply()

    async def twice() -> None:
        await meter.acall(model, ASKED)
        await meter.acall(model, ASKED)

    with pytest.raises(BudgetSpent):
        asyncio.run(twice())
    assert _kinds(meter) == ["model", "paid"]


def test_a_reply_without_token_counts_is_estimated_and_unpriced() -> None:
    parts = deps(**PRICED)
    bare = spent(parts, ASKED, AIMessage("The pro plan."))
    assert bare["cost"] is None
    assert bare["unpriced"] == f"a reply of scripted {NO_USAGE}"
    assert bare["tokens"] == bare["estimated"] > 0
    reported = spent(parts, ASKED, _reply(input_token_details={"cache_read": 300}))  # type: ignore[arg-type]
    assert (reported["tokens"], reported["cached"], reported["unpriced"]) == (500, 300, None)
    assert "estimated" not in reported


class _Status(Exception):
    """What an OpenAI-compatible client raises for an error the server answered with."""

    def __init__(self, status: int) -> None:
        super().__init__(f"Error code: {status}")
        self.status_code = status


def _flaky(*failures: Exception) -> Any:
    """A model that fails with ``failures`` in turn, then replies."""
    left = list(failures)

    def model() -> BaseMessage:
        if left:
            raise left.pop(0)
        return _reply()

    return model


@pytest.fixture
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    from gated_react._engine.model import model_retry

    monkeypatch.setattr(model_retry, "jittered", lambda attempt, first, cap: 0.0)


@pytest.mark.usefixtures("no_waits")
def test_an_attempt_the_server_refused_is_retried_and_is_no_model_call() -> None:
    """A 500 or a 429 was answered, not served: not a step, no tokens, no cost; its time
    counts. The attempt that replied is the decision's one model call."""
    meter = _meter(**PRICED)
    assert meter.call(_flaky(_Status(500), _Status(429)), ASKED).text == "The pro plan."
    # each wait before a retry is recorded when the next attempt starts (a ``running`` record)
    waited = ["model", "paid", "running"]
    assert _kinds(meter) == [*waited, *waited, "model", "paid"]
    usage = _usage(meter)
    assert (usage.steps, usage.tokens, usage.estimated_tokens) == (1, 500, 0)
    assert usage.cost == pytest.approx(0.5)


@pytest.mark.usefixtures("no_waits")
def test_a_reply_lost_on_its_way_back_is_retried_and_keeps_its_estimate() -> None:
    import httpx

    meter = _meter(**PRICED)
    meter.call(_flaky(httpx.ReadTimeout("read timed out")), ASKED)
    usage = _usage(meter)
    assert usage.steps == 1  # the lost reply made no decision
    # but the server may have answered (and billed) it: its estimate counts
    assert usage.tokens == 500 + usage.estimated_tokens
    assert usage.estimated_tokens > 0


@pytest.mark.usefixtures("no_waits")
def test_retries_stop_at_model_retries_and_never_for_an_error_that_stays() -> None:
    meter = _meter(model_retries=1, **PRICED)
    with pytest.raises(_Status):
        meter.call(_flaky(_Status(503), _Status(503), _Status(503)), ASKED)
    assert _kinds(meter).count("model") == 2
    refused = _meter(**PRICED)
    with pytest.raises(_Status):
        refused.call(_flaky(_Status(401)), ASKED)
    assert _kinds(refused).count("model") == 1


def test_a_call_the_deadline_abandoned_spent_the_seconds_left() -> None:
    """The node's thread gives up on a hung call: its record counts from when the decision
    began waiting, so the run's active seconds reach its budget."""
    import time

    meter = _meter(**PRICED)
    meter.began = time.monotonic() - 3.0
    opened = meter.before(ASKED)
    meter.place.ledger.append([opened])
    meter.attempt = (opened, time.monotonic() - 1.0)
    abandoned = meter.abandoned()
    assert abandoned is not None
    assert meter.abandoned() is None  # once
    meter.place.ledger.append([abandoned])
    assert _usage(meter).seconds >= 3.0
    assert _usage(meter).steps == 1


def test_the_wait_before_a_retry_counts_as_the_models_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a run whose model answered 503 with ``Retry-After: 20`` waited 42 s in all and
    counted 0.02 active seconds. The wait is counted in the next attempt's seconds."""
    from gated_react._engine.model import model_retry

    monkeypatch.setattr(model_retry, "jittered", lambda attempt, first, cap: 0.05)
    meter = _meter(**PRICED)
    meter.call(_flaky(_Status(503)), ASKED)
    assert _usage(meter).seconds >= 0.05


def test_a_wait_before_a_retry_cut_off_by_ctrl_c_keeps_its_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: a kill or Ctrl-C while the run waited to retry left none of the wait counted
    (0.01 s after three kills 8 s into such waits). The waiting caller's beat records it."""
    from gated_react._engine.model import model_retry

    meter, wait = _meter(**PRICED), time.sleep

    def interrupted(seconds: float) -> None:
        wait(0.05)  # part of the wait passes
        meter.beat()  # what the caller's beat, or its Ctrl-C handler, records
        raise KeyboardInterrupt

    monkeypatch.setattr(model_retry, "jittered", lambda attempt, first, cap: 5.0)
    monkeypatch.setattr(model_retry.time, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        meter.call(_flaky(_Status(503)), ASKED)
    assert _usage(meter).seconds >= 0.05
