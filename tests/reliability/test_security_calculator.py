"""Hostile input for the calculator, beyond tests/tools/test_calculator.py: everything that is
not arithmetic is refused, every result is a finite number of at most 1000 digits, and nothing
raises anything but one ValueError line; checked by example and by hypothesis."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gated_react.tools.calculator import MAX_DEPTH, MAX_LENGTH, MAX_RESULT_DIGITS, evaluate

from . import tally
from .strategies import PARSER_EXAMPLES, any_text

NOT_ARITHMETIC = [
    "__builtins__",
    "().__class__.__bases__[0].__subclasses__()",
    "(1).real",
    "(1).__add__(2)",
    "open('/etc/passwd').read()",
    "exec('1')",
    "globals()",
    "[1, 2][0]",
    "{1: 2}",
    "{1, 2}",
    "(1, 2)",
    "{x for x in (1,)}",
    "[x for x in range(9 ** 9)]",
    "(x for x in (1,))",
    "lambda x: x",
    "(y := 5)",
    "f'{1}'",
    "b'1'",
    "'1' + '2'",
    "...",
    "None",
    "1 if 1 else 2",
    "1 < 2",
    "1 and 2",
    "not 1",
    "~1",
    "1 << 100000",
    "1 & 1",
    "1 | 2",
    "1 ^ 3",
    "1 @ 2",
    "1j",
    "1 + 2j",
    "*a",
    "a.b.c",
    "١٢٣ + 1",
    "1; 2",
    "1\n+ 2",
    "import os",
]
TOO_BIG = [
    "2 ** 2 ** 2 ** 2 ** 2",
    "(-1) ** (10 ** 20)",
    "0.5 ** -100000",
    "10 ** 999 * 10 ** 999",
    "(10 ** 999) ** 1.0",
    "10 ** 999 / 3",
    "10 ** 999 * 1.0",
    "1e308 + 1e308",
    "-9e999",
    "0 ** -1",
    "1 % 0",
    "-(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1),
    "-" * (MAX_LENGTH - 1) + "1",
    "1" + "+1" * 100,
    "9" * (MAX_LENGTH + 1),
]


@pytest.mark.parametrize("expression", NOT_ARITHMETIC + TOO_BIG)
def test_refused(expression: str) -> None:
    with pytest.raises(ValueError) as err:  # noqa: PT011 (the message names the case)
        evaluate(expression)
    assert "\n" not in str(err.value)


def assert_bounded(expression: str) -> None:
    """A finite int or float within the digit cap, or one ValueError line; nothing else."""
    tally.count("fuzz cases: calculator")
    try:
        value: object = evaluate(expression)
    except ValueError as err:
        value = err
    if isinstance(value, ValueError):
        assert "\n" not in str(value)
        return
    assert type(value) in (int, float)
    if isinstance(value, float):
        assert math.isfinite(value)
    elif isinstance(value, int):
        assert abs(value) < 10**MAX_RESULT_DIGITS


numbers = st.sampled_from(["0", "1", "2", "9", "10", "0.5", "1e308", "1e-308", "999999999999"])
numbers |= st.integers(-(10**30), 10**30).map(str) | st.floats(
    allow_nan=False, allow_infinity=False
).map(repr)
operators = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", " ** -", " ** "])


@st.composite
def arithmetic(draw: st.DrawFn, depth: int = 0) -> str:
    if depth > 3 or draw(st.sampled_from([True, False, False])):
        return draw(numbers)
    left, right = draw(arithmetic(depth + 1)), draw(arithmetic(depth + 1))
    unary = draw(st.sampled_from(["", "-", "+", "--"]))
    return f"{unary}({left}{draw(operators)}{right})"


@pytest.mark.timeout(120)
@settings(max_examples=PARSER_EXAMPLES)
@given(expression=arithmetic() | any_text)
def test_any_expression_is_bounded(expression: str) -> None:
    assert_bounded(expression[:MAX_LENGTH])
