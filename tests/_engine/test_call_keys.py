from __future__ import annotations

from gated_react._engine.call_keys import (
    args_hash,
    canonical_json,
    idempotency_key,
    is_repeat,
    loop_key,
    normalize,
)


def test_key_order_never_matters_at_any_depth() -> None:
    a = {"b": 1, "a": {"y": [1, {"q": 1, "p": 2}], "x": None}}
    b = {"a": {"x": None, "y": [1, {"p": 2, "q": 1}]}, "b": 1}
    assert canonical_json(a) == canonical_json(b)
    assert args_hash(a) == args_hash(b)
    assert len(args_hash(a)) == 12


def test_different_args_differ_and_none_is_empty() -> None:
    assert args_hash({"user_id": 42}) != args_hash({"user_id": 7})
    assert args_hash(None) == args_hash({})


def test_normalize_trims_collapses_and_casefolds_strings_only() -> None:
    assert normalize({"q": "  Refund\t\nPOLICY  ", "n": 5, "l": [" A  b "]}) == {
        "q": "refund policy",
        "n": 5,
        "l": ["a b"],
    }


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


def test_idempotency_keys_are_stable_per_thread_step_tool_and_args() -> None:
    key = idempotency_key("t1", 3, "refund", {"amount": 5, "user": 42})
    assert key == idempotency_key("t1", 3, "refund", {"user": 42, "amount": 5})
    assert len(key) == 24
    others = {
        idempotency_key("t2", 3, "refund", {"amount": 5, "user": 42}),
        idempotency_key("t1", 4, "refund", {"amount": 5, "user": 42}),
        idempotency_key("t1", 3, "refund2", {"amount": 5, "user": 42}),
        idempotency_key("t1", 3, "refund", {"amount": 6, "user": 42}),
    }
    assert key not in others
    assert len(others) == 4
