from __future__ import annotations

from gated_react._engine.call_keys import args_hash, canonical_json, normalize


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
