from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gated_react._engine.execution.call_keys import (
    LoopIndex,
    args_hash,
    call_key,
    canonical_json,
    is_repeat,
    loop_key,
    normalize,
    repeats,
    tool_counts,
    tool_of,
)
from gated_react.policy import LoopMode


def test_key_order_never_matters_at_any_depth() -> None:
    a = {"b": 1, "a": {"y": [1, {"q": 1, "p": 2}], "x": None}}
    b = {"a": {"x": None, "y": [1, {"p": 2, "q": 1}]}, "b": 1}
    assert canonical_json(a) == canonical_json(b)
    assert args_hash(a) == args_hash(b)
    assert len(args_hash(a)) == 12


def test_different_args_differ_and_none_is_empty() -> None:
    assert args_hash({"user_id": 42}) != args_hash({"user_id": 7})
    assert args_hash(None) == args_hash({})


def test_normalize_trims_collapses_and_casefolds_strings_and_spells_numbers_one_way() -> None:
    assert normalize({"q": "  Refund\t\nPOLICY  ", "n": 5, "l": [" A  b "], "b": True}) == {
        "q": "refund policy",
        "n": "5",
        "l": ["a b"],
        "b": True,
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


def test_call_keys_are_stable_per_run_tool_args_and_occurrence() -> None:
    """The same call of the same run wherever it is replayed (a fork, a copy, an answer sent
    twice); another run, tool, argument or occurrence (asked for again on purpose) has its own."""
    key = call_key("t1\nq1", "refund", {"amount": 5, "user": 42}, 0)
    assert key == call_key("t1\nq1", "refund", {"user": 42, "amount": 5}, 0)
    assert len(key) == 24
    others = {
        call_key("t2\nq1", "refund", {"amount": 5, "user": 42}, 0),
        call_key("t1\nq2", "refund", {"amount": 5, "user": 42}, 0),
        call_key("t1\nq1", "refund2", {"amount": 5, "user": 42}, 0),
        call_key("t1\nq1", "refund", {"amount": 6, "user": 42}, 0),
        call_key("t1\nq1", "refund", {"amount": 5, "user": 42}, 1),
    }
    assert key not in others
    assert len(others) == 5


def test_under_normalized_loop_detection_a_numbers_spellings_are_one_call() -> None:
    """Issue 43: a fork whose model proposed ``pay(amount="5")`` again as ``5.0`` paid twice:
    under ``loop_detection="normalized"`` both have one key, so the record finds the first."""
    spellings = [{"amount": "5"}, {"amount": 5.0}, {"amount": 5}, {"amount": " 5 "}]
    keys = {call_key("t1\nq1", "pay", args, 0, normalized=True) for args in spellings}
    assert len(keys) == 1
    exact = {call_key("t1\nq1", "pay", args, 0) for args in spellings}
    assert len(exact) == len(spellings)


MODES: tuple[LoopMode, ...] = ("exact", "normalized")
MANY = [
    loop_key("search", {"q": "shipping"}),
    loop_key("search", {"q": "Refund  Policy", "n": 1}),
    loop_key("lookup", {"q": "refund policy", "n": 1}),
]


def test_both_modes_find_one_matching_call_among_several() -> None:
    for mode in MODES:
        assert is_repeat(MANY, "search", {"q": "Refund  Policy", "n": 1}, mode)
        assert is_repeat(list(reversed(MANY)), "search", {"n": 1, "q": "Refund  Policy"}, mode)
        assert not is_repeat(MANY, "search", {"q": "returns"}, mode)
    assert is_repeat(MANY, "search", {"q": " REFUND policy", "n": 1}, "normalized")
    assert not is_repeat(MANY, "search", {"q": " REFUND policy", "n": 1}, "exact")


def test_an_empty_history_never_matches() -> None:
    for mode in MODES:
        assert not is_repeat([], "search", {"q": "x"}, mode)


def test_normalized_mode_needs_the_same_tool_and_the_same_normalized_args() -> None:
    seen = [loop_key("lookup", {"q": "a"}), loop_key("search", {"q": "b"})]
    assert not is_repeat(seen, "search", {"q": "a"}, "normalized")
    assert not is_repeat(seen, "lookup", {"q": "b"}, "normalized")
    assert is_repeat(seen, "lookup", {"q": " A "}, "normalized")


def test_canonical_json_is_compact_sorted_ascii_and_stringifies_the_rest() -> None:
    assert canonical_json({"b": [1, "é"], "a": None}) == '{"a":null,"b":[1,"\\u00e9"]}'
    assert canonical_json({"when": Path("/x")}) == '{"when":"/x"}'


def test_normalize_reaches_tuples_and_stringifies_keys() -> None:
    assert normalize({1: (" X ", {"k": "Y  Z"})}) == {"1": ["x", {"k": "y z"}]}
    assert normalize(None) is None


@pytest.mark.parametrize("mode", ["exact", "normalized"])
def test_a_tool_named_with_colons_is_found_again_and_never_raises(mode: LoopMode) -> None:
    seen = [loop_key("ns:echo", {"x": 1}), loop_key("a:b:c", {"y": 2})]
    assert is_repeat(seen, "ns:echo", {"x": 1}, mode)
    assert is_repeat(seen, "a:b:c", {"y": 2}, mode)
    assert not is_repeat(seen, "ns", {"x": 1}, mode)
    assert not is_repeat(seen, "echo", {"x": 1}, mode)
    assert not is_repeat(seen, "b:c", {"y": 2}, mode)


@pytest.mark.parametrize(
    ("first", "again"),
    [(42, "42"), (42, 42.0), ("42", " 4.2e1 "), (1.5, "1.50"), (0, "-0"), (10**30, "1e30")],
)
def test_normalized_mode_treats_a_number_and_its_spellings_as_one(first: Any, again: Any) -> None:
    seen = [loop_key("get_user", {"user_id": first})]
    assert is_repeat(seen, "get_user", {"user_id": again}, "normalized")
    assert not is_repeat(seen, "get_user", {"user_id": again}, "exact")


@pytest.mark.parametrize(("value", "other"), [(1, True), ("42", "42a"), (42, 43), ("nan", "NaN ")])
def test_numbers_stay_apart_from_booleans_and_other_values(value: Any, other: Any) -> None:
    same = normalize({"v": value}) == normalize({"v": other})
    assert same is (value == "nan")  # "nan" is text, compared as text (case-folded)


def test_non_finite_floats_are_not_turned_into_number_strings() -> None:
    assert normalize({"x": float("inf")}) == {"x": float("inf")}
    assert math.isnan(normalize([float("nan")])[0])


@pytest.mark.parametrize(
    ("spellings", "canonical"),
    [
        ((0, 0.0, "-0", "0e5", " .0 "), "0"),
        ((1.5, "1.50", "15e-1"), "1.5"),
        ((-42, "-4.2e1", -42.0), "-42"),
        (("1e999",), "1" + "0" * 999),
        (("1e1000", "10e999"), "1E+1000"),
        (("1e-1000",), "1E-1000"),
    ],
)
def test_numbers_have_one_canonical_spelling(spellings: tuple[Any, ...], canonical: str) -> None:
    assert [normalize(value) for value in spellings] == [canonical] * len(spellings)


def test_a_fraction_is_not_its_integer_part() -> None:
    seen = [loop_key("get_user", {"user_id": 1})]
    assert not is_repeat(seen, "get_user", {"user_id": 1.5}, "normalized")


class _Passes(list[str]):
    """A record that counts the passes made over it."""

    passes = 0

    def __iter__(self) -> Any:
        _Passes.passes += 1
        return super().__iter__()


@pytest.mark.parametrize("mode", ["exact", "normalized"])
def test_an_index_counts_the_record_once_and_then_looks_calls_up(mode: LoopMode) -> None:
    record = _Passes(loop_key("lookup", {"record": n}) for n in range(300))
    _Passes.passes = 0
    index = LoopIndex(record)
    built = _Passes.passes
    found = [repeats(index, "lookup", {"record": n}, mode) for n in (0, 150, 299, 300)]
    assert found == [1, 1, 1, 0]
    assert _Passes.passes == built  # no further pass over the record, however many checks
    index.add(loop_key("lookup", {"record": 300}))
    index.add(loop_key("lookup", {"record": " 300 "}))
    assert repeats(index, "lookup", {"record": 300}, mode) == (1 if mode == "exact" else 2)
    assert repeats(index, "lookup", {"record": 1}, mode) == repeats(
        record, "lookup", {"record": 1}, mode
    )


def test_tool_counts_read_every_keys_tool() -> None:
    keys = [loop_key("ns:echo", {"x": 1}), loop_key("ns:echo", {"x": 2}), loop_key("a", {})]
    assert tool_counts(keys) == {"ns:echo": 2, "a": 1}
    assert list(tool_counts(keys).elements()) == [tool_of(k) for k in keys]


_LOOKALIKES: list[tuple[str, dict[str, Any]]] = [
    ("search", {"q": 1}),
    ("search", {"q": 1.0}),
    ("search", {"q": "1"}),
    ("search", {"q": True}),
    ("search", {"q": " Refund  Policy "}),
    ("search", {"q": "refund policy"}),
    ("fetch", {"q": 1}),
    ("search:v2", {"q": 1}),
    ("search", {"q": [1, {"b": 2, "a": 1}]}),
    ("search", {}),
]


@pytest.mark.parametrize(("tool", "args"), _LOOKALIKES)
def test_a_kept_loop_key_is_the_key_computed_afresh(tool: str, args: dict[str, Any]) -> None:
    """The gate asks twice a call; the second answer is the kept one, and must be the key."""
    fresh = f"{tool}:{args_hash(args)}:{args_hash(normalize(args))}"
    for lookalike, other in _LOOKALIKES:  # every other key kept first
        loop_key(lookalike, other)
    assert loop_key(tool, args) == fresh
    assert loop_key(tool, args) == fresh


def test_the_kept_loop_keys_stay_bounded() -> None:
    from gated_react._engine.execution import call_keys

    for n in range(3 * call_keys._KEYS_KEPT):
        assert loop_key("lookup", {"record": n}).startswith("lookup:")
    assert 0 < len(call_keys._KEYS) <= call_keys._KEYS_KEPT
    assert loop_key("lookup", {"record": 7}) == (
        f"lookup:{args_hash({'record': 7})}:{args_hash(normalize({'record': 7}))}"
    )
    content = {"path": "big.txt", "content": "x" * (call_keys._KEPT_CHARS + 1)}
    assert loop_key("write_file", content) == loop_key("write_file", dict(content))
    assert not any(tool == "write_file" for tool, _ in call_keys._KEYS)


def test_keys_an_index_adds_are_its_own_not_the_runs_it_was_given() -> None:
    keys = [loop_key("lookup", {"record": 1})]
    counts = Counter(keys)
    index = LoopIndex(keys, counts)
    index.add(loop_key("lookup", {"record": 2}))
    assert repeats(index, "lookup", {"record": 2}, "exact") == 1
    assert repeats(index, "lookup", {"record": 2}, "normalized") == 1
    assert keys == [loop_key("lookup", {"record": 1})]
    assert counts == Counter(keys)  # the run's reading, as it was
    assert repeats(LoopIndex(keys, counts), "lookup", {"record": 2}, "exact") == 0
