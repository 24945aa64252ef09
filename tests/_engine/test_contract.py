"""The action contract, as a table: every accepted shape and every rejection code."""

from __future__ import annotations

from typing import Any

import pytest

from gated_react._engine.contract import ActionError, check_contract, load_json, strip_fence
from gated_react.state import FinalAction, ToolAction


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        ({"kind": "final", "answer": " Yes "}, FinalAction(answer="Yes")),
        ({"kind": "tool", "name": "t", "args": {"a": 1}}, ToolAction(name="t", args={"a": 1})),
        ({"kind": "tool", "name": "t", "args": None}, ToolAction(name="t", args={})),
        ({"kind": "tool", "name": "t"}, ToolAction(name="t", args={})),
    ],
)
def test_accepted(candidate: Any, expected: Any) -> None:
    assert check_contract(candidate) == expected


@pytest.mark.parametrize(
    ("candidate", "why"),
    [
        ([1, 2], "not_object"),
        ("final", "not_object"),
        (None, "not_object"),
        ({"answer": "x"}, "bad_kind"),
        ({"kind": "invalid"}, "bad_kind"),
        ({"kind": 1}, "bad_kind"),
        ({"kind": "final", "answer": "x", "why": "y"}, "extra_keys"),
        ({"kind": "tool", "name": "t", "args": {}, "thought": "z"}, "extra_keys"),
        ({"kind": "final"}, "missing_answer"),
        ({"kind": "final", "answer": "   "}, "missing_answer"),
        ({"kind": "final", "answer": 42}, "missing_answer"),
        ({"kind": "tool", "args": {}}, "missing_tool_name"),
        ({"kind": "tool", "name": ""}, "missing_tool_name"),
        ({"kind": "tool", "name": 7}, "missing_tool_name"),
        ({"kind": "tool", "name": "t", "args": [1]}, "bad_args"),
        ({"kind": "tool", "name": "t", "args": "user_id=42"}, "bad_args"),
        ({"kind": [[[[]]]] * 3}, "bad_kind"),
        ({"kind": "tool", "name": "t", "args": {"n": 2**64}}, "bad_args"),
    ],
)
def test_rejected(candidate: Any, why: str) -> None:
    with pytest.raises(ActionError) as err:
        check_contract(candidate)
    assert err.value.why == why
    assert str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        "{'a': 1}",
        "",
        "NaN",
        '{"a": NaN}',
        "[" * 100_000,
        '{"a": 1} trailing',
        "[" * 65 + "]" * 65,
        '{"n": 18446744073709551616}',
    ],
)
def test_load_json_rejects(text: str) -> None:
    with pytest.raises(ActionError) as err:
        load_json(text)
    assert err.value.why == "bad_json"


def test_load_json_accepts_one_fence() -> None:
    assert load_json('```json\n{"kind": "final", "answer": "x"}\n```') == {
        "kind": "final",
        "answer": "x",
    }
    assert strip_fence("```\n[1]\n```") == "[1]"
