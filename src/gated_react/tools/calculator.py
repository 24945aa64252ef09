"""Arithmetic by walking the expression's syntax tree: numbers and + - * / // % ** only, no eval."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from langchain_core.tools import tool
from pydantic import BaseModel, Field

from gated_react.tools._meta import idempotent

MAX_LENGTH = 200
MAX_DEPTH = 40
MAX_RESULT_DIGITS = 1000
_TOO_BIG = 10**MAX_RESULT_DIGITS  # the smallest integer with one digit too many

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


class CalcArgs(BaseModel):
    expression: str = Field(
        min_length=1, max_length=MAX_LENGTH, description="Arithmetic, e.g. '(599 + 199) * 1.5'"
    )


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression; ValueError for anything else or anything too big."""
    if len(expression) > MAX_LENGTH:
        raise ValueError(f"expression longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
        raise ValueError(f"not an arithmetic expression: {expression[:60]!r}") from None
    return _eval(tree.body, 0)


def _eval(node: ast.AST, depth: int) -> int | float:
    if depth > MAX_DEPTH:
        raise ValueError(f"expression nested deeper than {MAX_DEPTH}")
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ValueError("not allowed in arithmetic: booleans")
        _check_size(node.value)  # a literal like 9e999 is already infinite
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, depth + 1))  # type: ignore[no-any-return]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, depth + 1), _eval(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        try:
            value = _BINARY[type(node.op)](left, right)
        except (ZeroDivisionError, OverflowError) as exc:
            raise ValueError(str(exc)) from None
        _check_size(value)
        return value  # type: ignore[no-any-return]
    raise ValueError(f"not allowed in arithmetic: {type(node).__name__}")


def _check_power(base: float, exponent: float) -> None:
    if abs(exponent) > 10_000 or (
        abs(base) > 1 and exponent > 0 and exponent * math.log10(abs(base)) > MAX_RESULT_DIGITS
    ):
        raise ValueError(f"power too large: {base} ** {exponent}")


def _check_size(value: float) -> None:
    # Decimal digits, the sign not counted; compared, not printed (str() is quadratic in size).
    if isinstance(value, int) and abs(value) >= _TOO_BIG:
        raise ValueError(f"result has more than {MAX_RESULT_DIGITS} digits")
    if isinstance(value, complex):
        raise ValueError("result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("result is not a finite number")


@idempotent
@tool(args_schema=CalcArgs)
def calculate(expression: str) -> dict[str, Any]:
    """Evaluate arithmetic with + - * / // % ** and parentheses; no names or functions."""
    return {"expression": expression, "result": evaluate(expression)}
