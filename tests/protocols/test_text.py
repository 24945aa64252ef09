from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool

from gated_react._engine.model.contract import ActionError
from gated_react.protocols.text import parse_text
from gated_react.tools.support import SUPPORT_TOOLS


@tool
def two_args(a: str, b: int) -> str:
    """Needs two arguments."""
    return a * b


@tool
def no_args() -> str:
    """Takes nothing."""
    return "ok"


TOOLS: dict[str, Any] = {t.name: t for t in [*SUPPORT_TOOLS, two_args, no_args]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'Thought: need the profile\nAction: get_user_profile\nAction Input: {"user_id": 42}',
            {"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}},
        ),
        (
            "thought:x\n  ACTION :  get_user_billing  \naction input:\n```json\n"
            '{"user_id": 7}\n```\n',
            {"kind": "tool", "name": "get_user_billing", "args": {"user_id": 7}},
        ),
        (
            "Thought: done\nFinish: No refund for Max.",
            {"kind": "final", "answer": "No refund for Max."},
        ),
        ("Final Answer: 42", {"kind": "final", "answer": "42"}),
        ("Action: get_user_profile", {"kind": "tool", "name": "get_user_profile", "args": None}),
        (
            "Action: get_user_profile[42]",
            {"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}},
        ),
        (
            "Action: search_policy[refund window]",
            {"kind": "tool", "name": "search_policy", "args": {"query": "refund window"}},
        ),
        (
            "Action: finish[The test fails: off by one]",
            {"kind": "final", "answer": "The test fails: off by one"},
        ),
        ("Action: no_such_tool[x]", {"kind": "tool", "name": "no_such_tool", "args": {}}),
        (
            "Thought: run it\nAction: search_policy[refund]\nI will wait for the result.",
            {"kind": "tool", "name": "search_policy", "args": {"query": "refund"}},
        ),
        (
            "Action: `get_user_billing[7]`",
            {"kind": "tool", "name": "get_user_billing", "args": {"user_id": 7}},
        ),
        (
            "Action: finish[Line one\nline two]",
            {"kind": "final", "answer": "Line one\nline two"},
        ),
        ("Action: finish[No refund.]\nThanks!", {"kind": "final", "answer": "No refund."}),
        ("Action: no_args[]", {"kind": "tool", "name": "no_args", "args": {}}),
    ],
)
def test_parses(text: str, expected: dict[str, Any]) -> None:
    assert parse_text(text, TOOLS) == expected


def test_only_the_first_action_counts_and_a_made_up_observation_is_dropped() -> None:
    text = (
        'Action: get_user_profile\nAction Input: {"user_id": 42}\n'
        'Observation: {"user": "admin"}\nAction: delete_account\nFinish: done'
    )
    assert parse_text(text, TOOLS) == {
        "kind": "tool",
        "name": "get_user_profile",
        "args": {"user_id": 42},
    }


def test_bracket_argument_that_does_not_fit_the_type_stays_text() -> None:
    parsed = parse_text("Action: get_user_profile[Anna]", TOOLS)
    assert parsed["args"] == {"user_id": "Anna"}  # execute reports tool_bad_args


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("I think the answer is 42.", "no_action"),
        ("", "no_action"),
        ("Action: use the search tool please", "missing_tool_name"),
        ("Action: get_user_profile\nAction Input: {user_id: 42}", "bad_json"),
        ("Action: two_args[x]", "bad_args"),
    ],
)
def test_rejections(text: str, why: str) -> None:
    with pytest.raises(ActionError) as err:
        parse_text(text, TOOLS)
    assert err.value.why == why
