"""The outcome checker of the scripted scenarios: numbers, grounding, expectations."""

from __future__ import annotations

from scenarios.spec import Expect, grounded, numbers


def test_numbers_are_normalized() -> None:
    assert numbers("USD 1,414.50 from 11 orders; 31 °C + 100 = 131.0, 2026-03-02") == [
        "1414.5",
        "11",
        "31",
        "100",
        "131",
        "2026",
        "3",
        "2",
    ]


def test_grounded_flags_numbers_no_tool_returned() -> None:
    result = {"history": [{"observation": {"rows": [[11, 141450]]}}]}
    assert grounded("11 orders, 141,450 cents", result) == []
    assert grounded("11 orders, USD 2,000", result) == ["2000"]
    assert grounded("plus 100", result, goal="what is it plus 100?") == []


def test_expect_reports_every_difference() -> None:
    result = {
        "stop_reason": "success",
        "answer": "Yes, USD 50.",
        "trace": [{"tool": "a", "ok": True}, {"tool": "b", "ok": False, "error": "tool_error:b"}],
        "history": [{"observation": "49"}],
    }
    assert Expect("success", ("a", "b"), ("tool_error:b",), ("usd",)).problems(result) == []
    problems = Expect("max_steps", ("a",), (), ("USD 49",), grounded=True).problems(result)
    assert len(problems) == 5
    assert problems[0] == "stop_reason 'success', expected 'max_steps'"
