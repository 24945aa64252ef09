from __future__ import annotations

import pytest
from pydantic import ValidationError

from gated_react.tools.calculator import MAX_RESULT_DIGITS, calculate, evaluate


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(599 + 199) * 1.5", 1197.0),
        ("-2 ** 2", -4),
        ("7 // 2 + 7 % 2", 4),
        ("2 ** 10", 1024),
    ],
)
def test_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == value
    assert calculate.invoke({"expression": expression})["result"] == value


@pytest.mark.parametrize(
    "expression",
    ["10 ** 999 * 9", "-(10 ** 999) * 9", "9 * 10 ** 999 + (10 ** 999 - 1)", "2 ** 3321"],
)
def test_results_of_exactly_the_digit_cap_are_allowed(expression: str) -> None:
    result = evaluate(expression)
    assert isinstance(result, int)
    assert len(str(abs(result))) == MAX_RESULT_DIGITS


@pytest.mark.parametrize(
    "expression",
    [
        "10 ** 999 * 99",
        "10 ** 999 * 10",
        "-(10 ** 999) * 10",
        "(10 ** 500) ** 2",
        "10 ** 1000 // 10",  # every intermediate result counts
    ],
)
def test_one_digit_more_is_refused(expression: str) -> None:
    with pytest.raises(ValueError, match=f"^result has more than {MAX_RESULT_DIGITS} digits$"):
        evaluate(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('id')", "not allowed in arithmetic: Call"),
        ("(1).__class__", "not allowed in arithmetic: Attribute"),
        ("abs(-1)", "not allowed in arithmetic: Call"),
        ("x + 1", "not allowed in arithmetic: Name"),
        ("[i for i in range(10)]", "not allowed in arithmetic: ListComp"),
        ("lambda: 1", "not allowed in arithmetic: Lambda"),
        ("9 ** 9 ** 9", r"power too large: 9 \*\* 387420489"),
        ("10 ** 100000", r"power too large: 10 \*\* 100000"),
        ("2 ** 4000 * 2 ** 4000", r"power too large: 2 \*\* 4000"),
        ("1 / 0", "division by zero"),
        ("(1+" * 45 + "1" + ")" * 45, "expression nested deeper than 40"),
        ("-" * 150 + "1", "expression nested deeper than 40"),
        ("True + 1", "not allowed in arithmetic: booleans"),
        ("'a' * 3", "not allowed in arithmetic: Constant"),
        ("(-8) ** 0.5", "result is not a real number"),
        ("1e308 * 10", "result is not a finite number"),
        ("9e999", "result is not a finite number"),
        ("-9e999", "result is not a finite number"),
        ("1 +", r"not an arithmetic expression: '1 \+'"),
    ],
)
def test_everything_else_is_refused_with_its_reason(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        evaluate(expression)


def test_length_is_capped_by_the_schema() -> None:
    with pytest.raises(ValidationError, match="at most 200 characters"):
        calculate.invoke({"expression": "1+" * 150 + "1"})
    with pytest.raises(ValueError, match=r"^expression longer than 200 characters$"):
        evaluate("1+" * 150 + "1")
