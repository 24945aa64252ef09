"""``_Walk`` on hand-built listings (newest first, as every saver lists a thread): a step is on
a branch when a checkpoint not its own is newer than one of its own since the step began; when
its own is not stored yet, when another branch's writes completed one of its calls."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gated_react._engine.branches import Unsafe, _Walk
from gated_react._engine.call_keys import args_hash

Row = tuple[str, str | None, bool]
"""A checkpoint: its id, its parent's, and whether a step (a decision) comes next."""


def _listing(rows: list[Row], writes: dict[str, list[Any]] | None = None) -> list[Any]:
    def one(found: str, parent: str | None, starts: bool) -> Any:
        # the old branch's 08 holds the call its gate let through
        held = {"calls": [dict(PAY, id="c1", key="k1", outcome=None)]} if found == "08" else {}
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


PAY = {"tool": "pay", "args": {"item": "a"}}
SAME = frozenset({"pay:" + args_hash({"item": "a"})})


def _calls(
    ids: str = "c1", same: frozenset[str] = frozenset(), run: int = 0, turn: str | None = None
) -> Unsafe:
    """The step's calls: their ids, ``tool:arguments hash`` of each, their run and question."""
    return Unsafe(frozenset(ids.split()), same, run, turn)


def _verdict(current: str, listing: list[Any], calls: Unsafe | None = None) -> bool:
    walk = _Walk(current, calls or _calls())
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
                ("10", "09", True), ("09", "03", False), *CHAIN], True),  # a fork in step 1,
        # whose other branch let the call through in its step 2 (08)
    ],
)  # fmt: skip
def test_a_step_is_on_a_branch_when_a_newer_checkpoint_is_not_its_own(
    current: str, rows: list[Row], branched: bool
) -> None:
    assert _verdict(current, _listing(rows)) is branched


def test_another_branch_that_never_let_the_call_through_is_no_proof() -> None:
    """A rejection there (no gate let ``c1`` through) leaves this branch's call to run."""
    assert _verdict("09", _listing([("09", "07", False), *CHAIN]), _calls("c2")) is False


def test_unstored_the_steps_chain_gives_way_to_the_record() -> None:
    """``durability="exit"``: the step's own checkpoints are not stored, so the listing starts
    with another branch's; what its writes completed decides."""
    assert _verdict("20", _listing(CHAIN, PAID)) is True
    assert _verdict("20", _listing(CHAIN, PAID), _calls("c2")) is False
    assert _verdict("20", _listing(CHAIN)) is False


def test_under_time_travel_another_branch_is_enough() -> None:
    """A step re-run from before its decision proposes again (new call ids): LangGraph's time
    travel marks the invocation, and the other branch alone stops the call."""
    walk = _Walk("09", _calls("c2"), travel=True)
    verdicts = [walk.seen(checkpoint) for checkpoint in _listing([("09", "07", False), *CHAIN])]
    assert True in verdicts
    assert _verdict("09", _listing(CHAIN[:1]), _calls("c2")) is False


def test_a_call_recorded_without_an_id_is_known_by_its_key() -> None:
    keyed = {"04": [("task", "calls", [{"id": None, "key": "k1", "outcome": {"ok": True}}])]}
    assert _verdict("20", _listing(CHAIN, keyed), _calls("k1")) is True
    assert _verdict("20", _listing(CHAIN, keyed), _calls("k2")) is False


def test_a_call_proposed_again_on_a_fork_is_known_by_its_tool_and_arguments() -> None:
    """A fork before the decision (09 on 05, where the step began): the model proposed the
    same call again under a new id (c2); the other branch's gate let ``pay(item="a")`` through
    at 08, in the same run."""
    forked = _listing([("09", "05", True), *CHAIN[:4]])
    assert _verdict("09", forked, _calls("c2", SAME)) is True
    assert _verdict("09", forked, _calls("c2")) is False  # another call
    assert _verdict("09", forked, _calls("c2", SAME, run=3, turn="q2")) is False  # a later run
    forked[1].checkpoint["channel_values"]["turn"] = "q1"  # 08's question
    assert _verdict("09", forked, _calls("c2", SAME, run=3, turn="q1")) is True  # opened again


def test_a_fork_in_an_earlier_step_of_the_run_is_followed_back_to_the_runs_input() -> None:
    """Forked at step 1 (09 on 02), the run went on to step 2 (10-13, its decision at 11):
    the other branch's gate let the same call through at 08. The walk does not stop where
    this step began; it stops at the run's input. Time travel alone is no proof there: the
    other branch is older than this step."""
    rows: list[Row] = [
        ("13", "12", False),
        ("12", "11", False),
        ("11", "10", True),
        ("10", "09", False),
        ("09", "02", False),
        *CHAIN,
    ]
    listing = _listing(rows)
    listing[-1].metadata = {"source": "input"}  # 01: where the run began
    assert _verdict("13", listing, _calls("c2", SAME)) is True
    assert _verdict("13", listing, _calls("c2")) is False
    walk = _Walk("13", _calls("c2"), travel=True)
    assert [walk.seen(c) for c in listing][-1] is False


def test_unstored_the_same_call_of_the_same_run_is_known_in_the_record() -> None:
    """``durability="async"`` on a fork: the listing is searched as far as it goes, and the
    other branch completed the same call under its own id (c1). A later run asking for the
    same again is a new request."""
    paid = {"04": [("task", "calls", [dict(PAY, id="c1", outcome={"ok": True})])]}
    assert _verdict("20", _listing(CHAIN, paid), _calls("c2", SAME)) is True
    assert _verdict("20", _listing(CHAIN, paid), _calls("c2", SAME, run=5, turn="q2")) is False


def test_a_run_seen_linear_is_not_listed_again_at_its_next_step() -> None:
    """The next step's walk stops at the checkpoint the last walk started from (08), seen with
    no other branch back to the run's input: a step costs its own checkpoints, not the run's.
    A branch made since is newer than 08, so it is still met on the way."""
    run = _listing(
        [("12", "11", False), ("11", "10", False), ("10", "09", True), ("09", "08", False), *CHAIN]
    )
    run[-1].metadata = {"source": "input"}
    first = _Walk("08", _calls("c2"))
    assert [first.seen(c) for c in run[4:]][-1] is False
    assert first.linear
    walk = _Walk("12", _calls("c2"), known="08")
    verdicts = [walk.seen(c) for c in run]
    assert verdicts[:5] == [None, None, None, None, False]  # 12, 11, 10, 09, then 08: done
    forked = _listing([("13", "10", False), ("12", "11", False), ("11", "10", False)])
    walk = _Walk("13", _calls("c2", SAME), known="08")
    rest = [c for c in run if c.config["configurable"]["checkpoint_id"] <= "10"]
    forked[1].pending_writes = [("task", "calls", [dict(PAY, id="c1")])]  # 12 let it through
    assert [walk.seen(c) for c in [*forked, *rest]][1] is True
