from __future__ import annotations

from gated_react._engine.call_keys import is_repeat, loop_key

SEEN = [loop_key("search", {"q": "Refund  Policy", "n": 1})]


def test_exact_mode_matches_same_args_in_any_key_order() -> None:
    assert is_repeat(SEEN, "search", {"n": 1, "q": "Refund  Policy"}, "exact")
    assert not is_repeat(SEEN, "search", {"q": "refund policy", "n": 1}, "exact")
    assert not is_repeat(SEEN, "other", {"q": "Refund  Policy", "n": 1}, "exact")


def test_normalized_mode_ignores_case_and_spacing() -> None:
    assert is_repeat(SEEN, "search", {"q": " refund policy ", "n": 1}, "normalized")
    assert not is_repeat(SEEN, "search", {"q": "refund policies", "n": 1}, "normalized")
    assert not is_repeat(SEEN, "searcher", {"q": "refund policy", "n": 1}, "normalized")


def test_off_never_matches() -> None:
    assert not is_repeat(SEEN, "search", {"q": "Refund  Policy", "n": 1}, "off")


def test_tool_names_with_colons_do_not_confuse_keys() -> None:
    seen = [loop_key("a:b", {"x": 1})]
    assert not is_repeat(seen, "a", {"x": 1}, "exact")
