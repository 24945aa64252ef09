"""003 search and calculate as shipped: the timeouts table and the bracket calls of its tools."""

from __future__ import annotations

from pathlib import Path

from gated_react import examples
from gated_react.protocols.text import parse_text

EXAMPLE = examples.get("003-search")


def test_the_policy_carries_the_timeouts_table() -> None:
    policy = EXAMPLE.policy()
    assert policy.protocol == "text"
    assert policy.on_invalid_action == "retry"
    assert policy.on_tool_error == "observe"
    assert {name: policy.timeout_for(name) for name in ("calculate", "search", "live_weather")} == {
        "calculate": 5.0,
        "search": 10.0,
        "live_weather": 15.0,
    }


def test_the_text_protocol_reads_the_examples_bracket_calls(tmp_path: Path) -> None:
    tools = {t.name: t for t in EXAMPLE.tools(tmp_path)}
    assert parse_text("Action: live_weather[Beijing]", tools)["args"] == {"city": "Beijing"}
    assert parse_text("Action: search[K2 height]", tools)["args"] == {"query": "K2 height"}
    assert parse_text("Action: calculate[8849 - 8611]", tools)["args"] == {
        "expression": "8849 - 8611"
    }
