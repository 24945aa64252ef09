"""What a run spent, summed from its records (``Tally``): a model call counts from the moment it
is made, at its estimate, and then at what was paid, never both and never twice; a call is
counted once, whatever records it has; a budget a human extended counts only when its record
verifies. Nothing here reads the run's state."""

from __future__ import annotations

import math
from typing import Any

import pytest

from gated_react._engine.authority.records import Kind, Record
from gated_react._engine.authority.spend import Tally
from gated_react.state import Extension, Usage
from gated_react.store.key import StoreKey

KEY = StoreKey("k" * 32)
ESTIMATE = {"tokens": 100, "estimated": 100, "input": 100, "cost": 0.01, "unpriced": None}
PAID = {"tokens": 130, "input": 100, "output": 30, "cached": 40, "cost": 0.02, "unpriced": None,
        "seconds": 1.5}  # fmt: skip
EXTENDED = Extension(budget="max_steps", limit=12, was=8, spent=8, decision="approve", step=8)


def _rec(kind: Kind, key: str, *, signed: bool = True, **body: Any) -> Record:
    record = Record("t", "r", kind, key, body)
    return record.signed(KEY) if signed else record


def _usage(*records: Record, unkeyed: bool = False) -> Usage:
    tally = Tally(unkeyed=unkeyed)
    for record in records:
        tally.add(record)
    return tally.usage()


def test_a_model_call_counts_at_its_estimate_until_paid_then_at_what_was_paid() -> None:
    made = _usage(_rec(Kind.MODEL, "m1", **ESTIMATE))
    assert (made.steps, made.tokens, made.estimated_tokens, made.cost) == (1, 100, 100, 0.01)
    paid = _usage(_rec(Kind.MODEL, "m1", **ESTIMATE), _rec(Kind.PAID, "m1", **PAID))
    assert paid == Usage(steps=1, tokens=130, estimated_tokens=0, cached_tokens=40,
                         input_tokens=100, output_tokens=30, cost=0.02, seconds=1.5)  # fmt: skip


def test_a_call_paid_before_a_crash_is_never_free() -> None:
    """The process died between ``model`` and ``paid``: the call counts at its estimate."""
    crashed = _usage(_rec(Kind.MODEL, "m1", **ESTIMATE), _rec(Kind.MODEL, "m2", **ESTIMATE),
                     _rec(Kind.PAID, "m2", **PAID))  # fmt: skip
    assert (crashed.steps, crashed.tokens, crashed.cost) == (2, 230, 0.03)


def test_each_model_call_counts_once_whatever_records_it_has() -> None:
    twice = _usage(
        _rec(Kind.MODEL, "m1", **ESTIMATE),
        _rec(Kind.PAID, "m1", **PAID),
        _rec(Kind.MODEL, "m1", **ESTIMATE),  # read again after it was paid
        _rec(Kind.PAID, "m1", **{**PAID, "cost": 0.0, "tokens": 0}),  # paid again: not lower
    )
    assert (twice.steps, twice.tokens, twice.cost, twice.seconds) == (1, 130, 0.02, 1.5)
    unannounced = _usage(_rec(Kind.PAID, "m9", **PAID))
    assert (unannounced.steps, unannounced.cost) == (1, 0.02)


def test_a_call_that_could_not_be_priced_makes_the_cost_unknown_until_it_is() -> None:
    unpriced = {**ESTIMATE, "cost": None, "unpriced": "model 'x' is unpriced"}
    unknown = _usage(_rec(Kind.MODEL, "m1", **ESTIMATE), _rec(Kind.MODEL, "m2", **unpriced))
    assert (unknown.cost, unknown.unpriced) == (None, "model 'x' is unpriced")
    priced = _usage(_rec(Kind.MODEL, "m2", **unpriced), _rec(Kind.PAID, "m2", **PAID))
    assert (priced.cost, priced.unpriced) == (0.02, None)
    silent = _usage(_rec(Kind.PAID, "m3", **{**PAID, "cost": None, "unpriced": None}))
    assert silent.cost is None
    assert silent.unpriced == "a model call's cost is not known"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -0.5, True, "0.5"])
def test_an_amount_that_is_no_amount_is_unknown_never_zero(bad: Any) -> None:
    spent = _usage(_rec(Kind.PAID, "m1", **{**PAID, "cost": bad}))
    assert spent.cost is None
    assert spent.unpriced is not None


@pytest.mark.parametrize("bad", [-5, 2.5, True, "100", None])
def test_a_token_count_that_is_no_count_counts_nothing(bad: Any) -> None:
    spent = _usage(_rec(Kind.PAID, "m1", **{**PAID, "tokens": bad, "seconds": bad}))
    assert spent.steps == 1
    assert spent.tokens == 0
    assert spent.seconds == (2.5 if bad == 2.5 else 0.0)


def test_calls_count_once_each_by_tool_refused_ones_too() -> None:
    spent = _usage(
        _rec(Kind.PERMIT, "k1", call="c1", tool="search"),
        _rec(Kind.PERMIT, "k1", call="c1", tool="search"),  # admitted again (a replay, a fork)
        _rec(Kind.REFUSED, "k2", call="c2", tool="pay"),  # shown to the model as refused
        _rec(Kind.PERMIT, "k3", call="c3", tool="search", signed=False),  # any signature
        _rec(Kind.DONE, "k1", call="c1", tool="search", ok=True, seconds=0.25),
    )
    assert (spent.tool_calls, spent.per_tool) == (3, {"search": 2, "pay": 1})
    assert spent.seconds == 0.25


def test_a_permit_holds_only_when_it_verifies_and_the_latest_holds_once() -> None:
    tally = Tally()
    first = _rec(Kind.PERMIT, "k1", call="c1", tool="pay", args='{"a":5}', args_hash="h5")
    again = _rec(Kind.PERMIT, "k1", call="c1", tool="pay", args='{"a":5}', args_hash="h5")
    forged = _rec(Kind.PERMIT, "k1c", call="c1", tool="pay", args='{"a":7}', args_hash="h7",
                  signed=False)  # fmt: skip
    for record in (first, again, forged):
        tally.add(record)
    assert tally.permits == {"c1": again}
    assert tally.usage().tool_calls == 2  # the forged call under c1's id is another call
    tally.add(_rec(Kind.DONE, "k1", call="c1", tool="pay", ok=True))
    assert tally.permits == {}  # a permit lets its call run once


def test_an_extension_counts_only_when_its_record_verifies() -> None:
    body = EXTENDED.model_dump(mode="json")
    tally = Tally()
    tally.add(_rec(Kind.EXTENDED, "max_steps", signed=False, **body))  # written by someone else
    tally.add(_rec(Kind.EXTENDED, "max_steps", **{**body, "limit": "lots"}))  # not readable
    assert tally.extensions == []
    tally.add(_rec(Kind.EXTENDED, "max_steps", **body))
    assert tally.extensions == [EXTENDED]


def test_the_runs_opening_and_end_are_kept() -> None:
    tally = Tally()
    opened = _rec(Kind.OPENED, "r", policy_hash="p1")
    ended = _rec(Kind.ENDED, "r", reason="success")
    tally.add(opened)
    assert (tally.opened, tally.ended) == (opened, None)
    tally.add(ended)
    assert tally.ended == ended


def test_a_paid_record_that_does_not_verify_lowers_nothing() -> None:
    """Spend of any signature counts, so a record anyone could write may only raise it: a
    forged ``paid`` of 0 tokens (or one saying the call was never billed) leaves the estimate."""
    estimate = _rec(Kind.MODEL, "m1", tokens=900, estimated=900, input=900, cost=0.9)
    forged = _rec(Kind.PAID, "m1", signed=False, tokens=0, input=0, cost=0.0, unbilled=True)
    usage = _usage(estimate, forged)
    assert (usage.steps, usage.tokens, usage.input_tokens) == (1, 900, 900)
    assert usage.cost == pytest.approx(0.9)
    more = _rec(Kind.PAID, "m1", signed=False, tokens=1200, input=1000, output=200, cost=1.2)
    assert _usage(estimate, more).tokens == 1200  # a higher one still counts


def test_an_attempt_the_server_refused_is_no_step_but_its_time_counts() -> None:
    estimate = _rec(Kind.MODEL, "m1", tokens=900, estimated=900, input=900, cost=0.9)
    refused = _rec(Kind.PAID, "m1", unbilled=True, seconds=0.4)
    again = _rec(Kind.PAID, "m1", tokens=5, cost=0.01)  # nothing after it counts
    usage = _usage(estimate, refused, again)
    assert (usage.steps, usage.tokens, usage.cost) == (0, 0, 0.0)
    assert usage.seconds == pytest.approx(0.4)


def test_a_forged_refusal_before_the_real_records_frees_nothing() -> None:
    """A row written ahead of a call's own records (a trigger on the table) saying it was
    never billed: the call's signed records still count, in full."""
    forged = _rec(Kind.PAID, "m1", signed=False, unbilled=True)
    estimate = _rec(Kind.MODEL, "m1", **ESTIMATE)
    paid = _rec(Kind.PAID, "m1", **PAID)
    assert _usage(forged, estimate, paid) == _usage(estimate, paid)
    assert _usage(forged, estimate).tokens == 100  # crashed before paid: the estimate
    low = _rec(Kind.PAID, "m1", signed=False, tokens=1, input=1, cost=0.0)
    assert _usage(estimate, low, paid) == _usage(estimate, paid)  # the real one still lands


def test_without_a_store_key_another_processs_payment_is_taken_as_recorded() -> None:
    """No record another process wrote verifies in a store without a key: a run shown by
    ``show`` (or resumed) in a new process counts what it paid, as the run itself did, not the
    larger estimates. With a key, an unverified payment still cannot lower them."""
    cheap = {**PAID, "tokens": 40, "input": 30, "output": 10, "cached": 0, "cost": 0.001}
    estimate = _rec(Kind.MODEL, "m1", signed=False, **ESTIMATE)
    paid = _rec(Kind.PAID, "m1", signed=False, **cheap)
    assert _usage(estimate, paid, unkeyed=True) == _usage(
        _rec(Kind.MODEL, "m1", **ESTIMATE), _rec(Kind.PAID, "m1", **cheap)
    )
    assert _usage(estimate, paid, unkeyed=True).tokens == 40
    assert _usage(estimate, paid).tokens == 100  # keyed: the estimate stands


def test_a_call_killed_while_it_ran_keeps_the_seconds_its_beats_recorded() -> None:
    """A model call and a tool call, each with beats and no end (the process was killed):
    their seconds so far count, the latest beat of each, once."""
    killed = _usage(
        _rec(Kind.MODEL, "m1", **ESTIMATE),
        _rec(Kind.MODEL, "m1", **ESTIMATE, seconds=1.0),
        _rec(Kind.MODEL, "m1", **ESTIMATE, seconds=2.0),
        _rec(Kind.RUNNING, "k1", call="c1", tool="pay", seconds=1.0),
        _rec(Kind.RUNNING, "k1", call="c1", tool="pay", seconds=3.0),
    )
    assert (killed.steps, killed.seconds) == (1, 5.0)


def test_a_calls_end_replaces_its_beats_and_no_record_lowers_them() -> None:
    ended = _usage(
        _rec(Kind.MODEL, "m1", **ESTIMATE, seconds=2.0),
        _rec(Kind.PAID, "m1", **PAID),  # 1.5 s: what was paid settles a model call
        _rec(Kind.RUNNING, "k1", seconds=2.0),
        _rec(Kind.DONE, "k1", call="c1", tool="pay", seconds=2.5),
        _rec(Kind.RUNNING, "k2", seconds=4.0),
        _rec(Kind.RUNNING, "k2", seconds=1.0, signed=False),  # an older beat, or a forged one
        _rec(Kind.DONE, "k2", call="c2", tool="pay", seconds=0.0, signed=False),
    )
    assert ended.seconds == pytest.approx(1.5 + 2.5 + 4.0)


def _permit(call: str, *, signed: bool = True) -> Record:
    return _rec(Kind.PERMIT, f"k-{call}", signed=signed, call=call, tool="pay", args_hash="h")


def test_a_call_let_through_then_asked_of_the_model_again_never_ran_and_counts_not() -> None:
    """A permit, then a model call before the call started: its step was lost with a killed
    process and the model asked again. A refused call stays counted (the model saw it)."""
    lost = _usage(_permit("c1"), _rec(Kind.MODEL, "m2", **ESTIMATE))
    assert (lost.tool_calls, lost.per_tool) == (0, {})
    ran = _usage(_permit("c1"), _rec(Kind.DONE, "k-c1", call="c1", tool="pay", seconds=0.1),
                 _rec(Kind.MODEL, "m2", **ESTIMATE))  # fmt: skip
    assert (ran.tool_calls, ran.per_tool) == (1, {"pay": 1})
    started = _usage(_permit("c1"), _rec(Kind.STARTED, "k-c1", call="c1", tool="pay"),
                     _rec(Kind.MODEL, "m2", **ESTIMATE))  # fmt: skip
    assert started.tool_calls == 1  # it may have run
    refused = _usage(_rec(Kind.REFUSED, "k-c1", call="c1", tool="pay", args_hash="h"),
                     _rec(Kind.MODEL, "m2", **ESTIMATE))  # fmt: skip
    assert refused.tool_calls == 1


def test_no_record_of_any_signature_uncounts_a_call_that_ran() -> None:
    """A forged model call uncounts nothing; a call said to have started after its step was
    asked again counts again (spend only rises)."""
    forged = _usage(_permit("c1"), _rec(Kind.MODEL, "m2", signed=False, **ESTIMATE))
    assert forged.tool_calls == 1
    late = _usage(_permit("c1"), _rec(Kind.MODEL, "m2", **ESTIMATE),
                  _rec(Kind.DONE, "k-c1", call="c1", tool="pay", seconds=0.1))  # fmt: skip
    assert (late.tool_calls, late.per_tool) == (1, {"pay": 1})


def test_a_call_killed_then_run_again_counts_both_runs() -> None:
    """Before: a call killed and run again (an idempotent one, on resume) wrote its beats under
    the same key, and only the longest run counted: killed again and again, it never spent
    ``max_seconds``. Each run is an attempt of its own; its ``done`` settles only its own."""
    beat = {"call": "c1", "tool": "crunch"}
    twice = _usage(
        _rec(Kind.RUNNING, "k1", seconds=8.0, attempt="a", **beat),  # killed
        _rec(Kind.RUNNING, "k1", seconds=6.0, attempt="b", **beat),  # killed
        _rec(Kind.RUNNING, "k1", seconds=2.0, attempt="c", **beat),
        _rec(Kind.DONE, "k1", seconds=3.0, attempt="c", **beat),
    )
    assert twice.seconds == pytest.approx(8.0 + 6.0 + 3.0)


def test_a_call_let_through_again_after_its_step_was_asked_again_counts_once() -> None:
    again = _usage(_permit("c1"), _rec(Kind.MODEL, "m2", **ESTIMATE), _permit("c1"),
                   _rec(Kind.DONE, "k-c1", call="c1", tool="pay", seconds=0.1))  # fmt: skip
    assert (again.tool_calls, again.per_tool) == (1, {"pay": 1})


def test_with_a_key_a_spend_record_that_does_not_verify_puts_the_spend_in_doubt() -> None:
    """An honest ``paid`` edited in place is gone: what is left (its estimate, or the edited
    figures) can be lower than what was paid. Without a key nothing verifies in another
    process, so nothing is doubted there."""
    estimate = _rec(Kind.MODEL, "m1", **ESTIMATE)
    edited = _rec(Kind.PAID, "m1", signed=False, **{**PAID, "tokens": 0})
    keyed = Tally()
    for record in (estimate, edited):
        keyed.add(record)
    assert keyed.doubted == (
        "its paid record of m1 does not verify with the store key (edited, forged or copied)"
    )
    unkeyed = Tally(unkeyed=True)
    for record in (estimate, edited):
        unkeyed.add(record)
    assert unkeyed.doubted is None
    clean = Tally()
    for record in (estimate, _rec(Kind.PAID, "m1", **PAID), _rec(Kind.PERMIT, "c1", signed=False)):
        clean.add(record)
    assert clean.doubted is None  # a forged permit lets nothing run, and spends nothing
