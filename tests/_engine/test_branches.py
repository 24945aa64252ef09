"""``_Walk`` on hand-built listings (newest first, as every saver lists a thread): a step is on
a branch when a checkpoint not its own is newer than one of its own since the step began; when
its own is not stored yet, when another branch's writes completed one of its calls."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gated_react._engine.branches import Named, _Walk

Row = tuple[str, str | None, bool]
"""A checkpoint: its id, its parent's, and whether a step (a decision) comes next."""


def _listing(rows: list[Row], writes: dict[str, list[Any]] | None = None) -> list[Any]:
    def one(found: str, parent: str | None, starts: bool) -> Any:
        # the old branch's 08 holds the call its gate let through
        held = {"calls": [{"id": "c1", "key": "k1", "outcome": None}]} if found == "08" else {}
        return SimpleNamespace(
            config={"configurable": {"checkpoint_id": found}},
            parent_config={"configurable": {"checkpoint_id": parent}} if parent else None,
            checkpoint={
                "updated_channels": ["branch:to:decide"] if starts else ["calls"],
                "channel_values": held,
            },
            metadata={"source": "loop"},
            pending_writes=(writes or {}).get(found, []),
        )

    return [one(*row) for row in rows]


def _verdict(
    current: str,
    listing: list[Any],
    ids: frozenset[str] = frozenset({"c1"}),
    keys: frozenset[str] = frozenset(),
) -> bool:
    walk = _Walk(current, Named(ids, keys))
    for checkpoint in listing:
        verdict = walk.seen(checkpoint)
        if verdict is not None:
            return verdict
    return False


# 01 starts step 1; 05 starts step 2 (decide next), 06-08 its decision, validation, gate
CHAIN: list[Row] = [
    ("08", "07", False),
    ("07", "06", False),
    ("06", "05", False),
    ("05", "04", True),
    ("04", "03", False),
    ("03", "02", False),
    ("02", "01", False),
    ("01", None, True),
]
PAID = {"04": [("task", "calls", [{"id": "c1", "outcome": {"ok": True}}])]}


@pytest.mark.parametrize(
    ("current", "rows", "branched"),
    [
        ("08", CHAIN, False),  # one chain
        ("09", [("09", "07", False), *CHAIN], True),  # a resume sent to 07, which 08 follows
        ("12", [("12", "11", False), ("11", "10", False), ("10", "09", False),
                ("09", "06", False), *CHAIN], True),  # four edits in a row on 06
        ("09", [("09", "05", True), *CHAIN], True),  # a fork where the step began, continued
        ("09", [("09", "08", True), *CHAIN], False),  # a new step on the same chain
        ("13", [("13", "12", False), ("12", "11", False), ("11", "10", False),
                ("10", "09", True), ("09", "03", False), *CHAIN], False),  # an old fork
    ],
)  # fmt: skip
def test_a_step_is_on_a_branch_when_a_newer_checkpoint_is_not_its_own(
    current: str, rows: list[Row], branched: bool
) -> None:
    assert _verdict(current, _listing(rows)) is branched


def test_another_branch_that_never_let_the_call_through_is_no_proof() -> None:
    """A rejection there (no gate let ``c1`` through) leaves this branch's call to run."""
    assert _verdict("09", _listing([("09", "07", False), *CHAIN]), frozenset({"c2"})) is False


def test_unstored_the_steps_chain_gives_way_to_the_record() -> None:
    """``durability="exit"``: the step's own checkpoints are not stored, so the listing starts
    with another branch's; what its writes completed decides."""
    assert _verdict("20", _listing(CHAIN, PAID)) is True
    assert _verdict("20", _listing(CHAIN, PAID), frozenset({"c2"})) is False
    assert _verdict("20", _listing(CHAIN)) is False


def test_under_time_travel_another_branch_is_enough() -> None:
    """A step re-run from before its decision proposes again (new call ids): LangGraph's time
    travel marks the invocation, and the other branch alone stops the call."""
    walk = _Walk("09", Named(frozenset({"c2"}), frozenset()), travel=True)
    verdicts = [walk.seen(checkpoint) for checkpoint in _listing([("09", "07", False), *CHAIN])]
    assert True in verdicts
    assert _verdict("09", _listing(CHAIN[:1]), frozenset({"c2"})) is False


def test_a_call_recorded_without_an_id_is_known_by_its_key() -> None:
    keyed = {"04": [("task", "calls", [{"id": None, "key": "k1", "outcome": {"ok": True}}])]}
    assert _verdict("20", _listing(CHAIN, keyed), frozenset({"k1"})) is True
    assert _verdict("20", _listing(CHAIN, keyed), frozenset({"k2"})) is False


def test_a_call_proposed_again_on_a_fork_is_known_by_its_key_on_the_other_branch() -> None:
    """A fork before the decision (09 on 05, where the step began): the model proposed the
    same call again under a new id (c2); its key (thread, step, tool, arguments) is the one the
    other branch's gate let through at 08."""
    forked = _listing([("09", "05", True), *CHAIN[:4]])
    assert _verdict("09", forked, frozenset({"c2"}), frozenset({"k1"})) is True
    assert _verdict("09", forked, frozenset({"c2"}), frozenset({"k2"})) is False


def test_a_key_is_no_proof_in_the_record_of_an_earlier_run() -> None:
    """Unstored (``durability="async"``), the listing is searched as far as it goes: a later
    run numbers its steps from 1 again, so the same payment asked for in the next turn has the
    key of this one, completed at 04. Only its id would say it is the same call."""
    paid = {"04": [("task", "calls", [{"id": "c1", "key": "k1", "outcome": {"ok": True}}])]}
    assert _verdict("20", _listing(CHAIN, paid), frozenset({"c2"}), frozenset({"k1"})) is False
