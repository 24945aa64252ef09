"""``_Walk`` on hand-built listings (newest first, as every saver lists a thread): a step is on
a branch when a checkpoint not its own is newer than one of its last ``DEPTH``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gated_react._engine.branches import DEPTH, _Walk


def _listing(*pairs: tuple[str, str | None]) -> list[Any]:
    def tuple_of(found: str, parent: str | None) -> Any:
        parent_config = {"configurable": {"checkpoint_id": parent}} if parent else None
        return SimpleNamespace(
            config={"configurable": {"checkpoint_id": found}}, parent_config=parent_config
        )

    return [tuple_of(found, parent) for found, parent in pairs]


def _verdict(current: str, listing: list[Any]) -> bool:
    walk = _Walk(current)
    for checkpoint in listing:
        verdict = walk.seen(checkpoint)
        if verdict is not None:
            return verdict
    return False


CHAIN = [("06", "05"), ("05", "04"), ("04", "03"), ("03", "02"), ("02", "01"), ("01", None)]


@pytest.mark.parametrize(
    ("current", "listing", "branched"),
    [
        ("06", CHAIN, False),  # one chain
        ("06", [("06", "03"), ("05", "04"), ("04", "03"), *CHAIN[3:]], True),  # a fork of 03
        ("07", [("07", "03"), *CHAIN], True),  # a resume sent to 03 after the thread moved on
        ("07", CHAIN, False),  # the step's own checkpoint not stored yet: 06 is its parent
        ("07", [("07", "06"), *CHAIN], False),
        ("02", CHAIN[4:], False),  # a thread shorter than DEPTH
        ("10", [("10", "01"), *CHAIN], True),  # a fork of 01, the step's second checkpoint
        (  # a branch made before the step's last DEPTH checkpoints is an earlier step's
            "10",
            [("10", "09"), ("09", "08"), ("08", "07"), ("07", "01"), *CHAIN],
            False,
        ),
    ],
)
def test_a_step_is_on_a_branch_when_a_newer_checkpoint_is_not_its_own(
    current: str, listing: list[tuple[str, str | None]], branched: bool
) -> None:
    assert DEPTH == 4
    assert _verdict(current, _listing(*listing)) is branched
