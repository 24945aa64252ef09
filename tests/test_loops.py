from __future__ import annotations

from gated_react.loops import is_repeat
from gated_react.state import HistoryEntry

from .helpers import history_entry

HISTORY = [HistoryEntry.model_validate(history_entry(1, "search", q="Refund  Policy", n=1))]


def test_exact_mode_matches_same_args_in_any_key_order() -> None:
    assert is_repeat(HISTORY, "search", {"n": 1, "q": "Refund  Policy"}, "exact")
    assert not is_repeat(HISTORY, "search", {"q": "refund policy", "n": 1}, "exact")
    assert not is_repeat(HISTORY, "other", {"q": "Refund  Policy", "n": 1}, "exact")


def test_normalized_mode_ignores_case_and_spacing() -> None:
    assert is_repeat(HISTORY, "search", {"q": " refund policy ", "n": 1}, "normalized")
    assert not is_repeat(HISTORY, "search", {"q": "refund policies", "n": 1}, "normalized")


def test_off_never_matches() -> None:
    assert not is_repeat(HISTORY, "search", {"q": "Refund  Policy", "n": 1}, "off")
