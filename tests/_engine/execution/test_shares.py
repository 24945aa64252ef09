"""The run's time left, shared by the calls of a step (``Shares``): together they take no
more than is left, and what one did not use goes to those still running."""

from __future__ import annotations

import math

import pytest

from gated_react._engine.execution.shares import Shares


def test_calls_at_once_share_what_is_left_and_one_that_ends_hands_back_the_rest() -> None:
    """Before: each of n calls got 1/n of what was left, kept even after the others ended (a
    5 s call beside a 0.5 s one was cut at 1.5 s of a 3 s budget, and the run stopped
    ``max_seconds`` with a second left)."""
    shares = Shares(3.0)
    shares.begin([0, 1], 100.0)
    assert shares.until() == pytest.approx(101.5)  # both may run 1.5 s: 3 s together
    shares.end(0, 100.5)
    assert shares.until() == pytest.approx(102.5)  # the other: 2.5 s, all but what 0 took
    shares.end(1, 102.5)
    assert shares.until() == math.inf  # nothing runs


def test_every_call_has_its_share_from_the_first_moment() -> None:
    """Before: each call signed in as it started, so the first to start alone was given all
    that was left, the second half (3 hung calls counted 9.17 s of a 5 s budget). Now they
    are all counted from the step's start: no call's end is ever later than its share."""
    shares = Shares(5.0)
    shares.begin([0, 1, 2], 10.0)
    assert shares.until() == pytest.approx(10.0 + 5.0 / 3)
    assert Shares().until() == math.inf  # no time limit


def test_a_calls_seconds_count_from_when_its_share_began() -> None:
    """Before: a call counted its seconds from when its thread got to it, after its share
    began, so a call cut off at ``until()`` counted less than its share, and a run stopped
    ``max_seconds`` showed 19.997 s of 20 (seen under load)."""
    shares = Shares(0.05)
    shares.begin([0], 100.0)
    assert shares.started(0) == 100.0
    assert shares.until() - shares.started(0) == pytest.approx(0.05)
    assert shares.started(1) > 100.0  # a call the step did not begin: from now
