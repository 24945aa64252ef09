"""The action contract, as a table: every accepted shape and every rejection code."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from gated_react._engine.model.contract import (
    ActionError,
    check_answer,
    check_calls,
    check_contract,
    load_json,
    strip_fence,
)
from gated_react.state import FinalAction, ToolAction, ToolCalls


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        ({"kind": "final", "answer": " Yes "}, FinalAction(answer="Yes")),
        ({"kind": "tool", "name": "t", "args": {"a": 1}}, ToolAction(name="t", args={"a": 1})),
        ({"kind": "tool", "name": "t", "args": None}, ToolAction(name="t", args={})),
        ({"kind": "tool", "name": "t"}, ToolAction(name="t", args={})),
        ({"kind": "tool", "name": " t\n"}, ToolAction(name="t", args={})),
        ({"kind": "final", "answer": "\ud800"}, FinalAction(answer="\ufffd")),
    ],
)
def test_accepted(candidate: Any, expected: Any) -> None:
    assert check_contract(candidate) == expected


KIND = "kind must be 'tool' or 'final', got "
ANSWER = "a final answer needs a non-blank 'answer' string"
NAME = "a tool call needs a non-empty 'name' string"
MANY_KEYS = {"kind": "final", "answer": "x", **{f"{i}{'k' * 50}": 1 for i in range(7)}}


@pytest.mark.parametrize(
    ("candidate", "why", "message"),
    [
        ([1, 2], "not_object", "expected a JSON object, got list"),
        ("final", "not_object", "expected a JSON object, got str"),
        (None, "not_object", "expected a JSON object, got NoneType"),
        ({"answer": "x"}, "bad_kind", KIND + "'NoneType'"),
        ({"kind": "invalid"}, "bad_kind", KIND + "'invalid'"),
        ({"kind": "x" * 60}, "bad_kind", KIND + repr("x" * 50)),
        ({"kind": 1}, "bad_kind", KIND + "'int'"),
        (
            {"kind": "final", "answer": "x", "why": "y"},
            "extra_keys",
            "unexpected keys for a final answer: ['why']",
        ),
        (
            {"kind": "tool", "name": "t", "args": {}, "thought": "z"},
            "extra_keys",
            "unexpected keys for a tool call: ['thought']",
        ),
        (
            MANY_KEYS,
            "extra_keys",
            f"unexpected keys for a final answer: {[f'{i}' + 'k' * 39 for i in range(5)]}",
        ),
        ({"kind": "final"}, "missing_answer", ANSWER),
        ({"kind": "final", "answer": "   "}, "missing_answer", ANSWER),
        ({"kind": "final", "answer": 42}, "missing_answer", ANSWER),
        ({"kind": "tool", "args": {}}, "missing_tool_name", NAME),
        ({"kind": "tool", "name": ""}, "missing_tool_name", NAME),
        ({"kind": "tool", "name": " \t"}, "missing_tool_name", NAME),
        ({"kind": "tool", "name": 7}, "missing_tool_name", NAME),
        (
            {"kind": "tool", "name": "t", "args": [1]},
            "bad_args",
            "'args' must be a JSON object, got list",
        ),
        (
            {"kind": "tool", "name": "t", "args": "user_id=42"},
            "bad_args",
            "'args' must be a JSON object, got str",
        ),
        (
            {"kind": "tool", "name": "t", "args": {1: "x"}},
            "bad_args",
            "'args' must be a JSON object, got dict",
        ),
        ({"kind": [[[[]]]] * 3}, "bad_kind", KIND + "'list'"),
        (
            {"kind": "tool", "name": "t", "args": {"n": 2**64}},
            "bad_args",
            "'args' cannot be accepted: an integer outside the 64-bit range "
            "(65 bits; from -2**63 to 2**64-1)",
        ),
    ],
)
def test_rejected(candidate: Any, why: str, message: str) -> None:
    with pytest.raises(ActionError) as err:
        check_contract(candidate)
    assert err.value.why == why
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ('{"a": 1, "b": 2, "a": 3}', "duplicate keys in JSON object: ['a']"),
        (
            "{" + ", ".join(f'"{k}": 1, "{k}": 2' for k in "fedcba") + "}",
            "duplicate keys in JSON object: ['a', 'b', 'c', 'd', 'e']",
        ),
        ("{'a': 1}", "not valid JSON: Expecting property name"),
        ("1" * 5000, "not valid JSON: Exceeds the limit (4300 digits)"),
        ("", "not valid JSON: Expecting value"),
        ("NaN", "not valid JSON: NaN is not JSON"),
        ('{"a": NaN}', "not valid JSON: NaN is not JSON"),
        ("[" * 100_000, "not valid JSON: "),
        ('{"a": 1} trailing', "not valid JSON: Extra data"),
        ("[" * 65 + "]" * 65, "JSON that cannot be accepted: values nested deeper than 64"),
        ('{"n": 18446744073709551616}', "JSON that cannot be accepted: an integer outside"),
    ],
)
def test_load_json_rejects(text: str, start: str) -> None:
    with pytest.raises(ActionError, match=f"^{re.escape(start)}") as err:
        load_json(text)
    assert err.value.why == "bad_json"
    assert len(str(err.value)) <= len("not valid JSON: ") + 200


@pytest.mark.parametrize(
    ("text", "body"),
    [
        ("```\n[1]\n```", "[1]"),
        ("  ```json\n[1]\n```  ", "[1]"),
        ("```[1]```", "[1]"),
        ("```json [1]\n2\n```", "json [1]\n2"),
        ("``````", ""),
        ("```", "```"),
        ("```[1]", "```[1]"),
        ("[1]```", "[1]```"),
    ],
)
def test_strip_fence_removes_one_fence_and_a_language_tag(text: str, body: str) -> None:
    assert strip_fence(text) == body


def test_load_json_accepts_one_fence() -> None:
    assert load_json('```json\n{"kind": "final", "answer": "x"}\n```') == {
        "kind": "final",
        "answer": "x",
    }
    assert strip_fence("```\n[1]\n```") == "[1]"


class Refund(BaseModel):
    """A structured answer."""

    model_config = ConfigDict(extra="forbid")
    eligible: bool
    amount_usd: float


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("[]", "answer: Input should be a valid dictionary or instance of Refund"),
        ('{"eligible": true, "amount_usd": 1, "x": 2}', "x: Extra inputs are not permitted"),
    ],
)
def test_check_answer_names_where_the_answer_misses_the_schema(answer: str, message: str) -> None:
    with pytest.raises(ActionError) as err:
        check_answer(FinalAction(answer=answer), Refund)
    assert err.value.why == "answer_schema"
    assert str(err.value) == f"the answer does not fit Refund: {message}"


def test_check_answer_rewrites_a_fitting_answer_as_canonical_json() -> None:
    fitted = check_answer(FinalAction(answer='{"amount_usd": 5, "eligible": false}'), Refund)
    assert fitted == FinalAction(answer='{"eligible":false,"amount_usd":5.0}')


def _call(name: Any, **args: Any) -> dict[str, Any]:
    return {"kind": "tool", "name": name, "args": args}


def test_check_calls_holds_each_call_to_the_tool_contract_in_order() -> None:
    calls = check_calls([_call(" a ", x=1), _call("b")])
    assert calls == ToolCalls(calls=[ToolAction(name="a", args={"x": 1}), ToolAction(name="b")])


@pytest.mark.parametrize(
    ("candidates", "why", "message"),
    [
        (
            [_call("a"), {"kind": "final", "answer": "x"}],
            "bad_kind",
            "every call of a reply with several must be a tool call",
        ),
        ([_call("a"), _call("")], "missing_tool_name", NAME),
        ([_call("a"), "b"], "not_object", "expected a JSON object, got str"),
    ],
)
def test_check_calls_rejects_a_batch_with_one_bad_call(
    candidates: list[Any], why: str, message: str
) -> None:
    with pytest.raises(ActionError) as err:
        check_calls(candidates)
    assert (err.value.why, str(err.value)) == (why, message)


@pytest.mark.parametrize("candidates", [[], [{"kind": "tool", "name": "a"}]])
def test_check_calls_raises_only_action_errors(candidates: list[Any]) -> None:
    with pytest.raises(ActionError) as err:  # the module's promise: no other exception
        check_calls(candidates)
    assert err.value.why == "bad_kind"
    assert str(err.value) == f"a list of calls holds two or more, got {len(candidates)}"


class Aliased(BaseModel):
    """A field the model names by its alias."""

    amount: float = Field(alias="amountUsd")


class OutAliased(BaseModel):
    """A field serialized under a name validation does not take."""

    amount: float = Field(serialization_alias="amountUsd")


@pytest.mark.parametrize(
    ("schema", "answer", "stored"),
    [
        (Aliased, '{"amountUsd": 5}', '{"amountUsd":5.0}'),
        (
            Refund,
            '{"eligible": true, "amount_usd": 1e308}',
            '{"eligible":true,"amount_usd":1e+308}',
        ),
    ],
)
def test_a_stored_answer_validates_back(schema: type[BaseModel], answer: str, stored: str) -> None:
    fitted = check_answer(FinalAction(answer=answer), schema)
    assert fitted.answer == stored
    schema.model_validate_json(fitted.answer)


@pytest.mark.parametrize(
    ("schema", "answer"),
    [
        (Refund, '{"eligible": true, "amount_usd": 1e999}'),  # inf: JSON can only say null
        (Refund, '{"eligible": true, "amount_usd": -1e999}'),
        (OutAliased, '{"amount": 5}'),  # stored as amountUsd, which validation refuses
    ],
)
def test_an_answer_that_would_not_validate_back_is_answer_schema(
    schema: type[BaseModel], answer: str
) -> None:
    with pytest.raises(ActionError) as err:
        check_answer(FinalAction(answer=answer), schema)
    assert err.value.why == "answer_schema"
    assert str(err.value).startswith(f"the answer fits {schema.__name__} but does not read back")
