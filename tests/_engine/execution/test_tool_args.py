"""A tool call's arguments against its tool (``tool_args``): a JSON schema checked by
``jsonschema``, and the schemas built with the graph, not at the first call."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool

from gated_react import build_graph
from gated_react._engine.execution import tool_args
from gated_react.testing import ScriptedChatModel

AMOUNT = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}


@pytest.mark.parametrize(
    ("schema", "args", "says"),
    [
        (AMOUNT, {"amount": 5}, None),
        (AMOUNT, {"amount": 5, "to": "x"}, "unknown arguments ['to']; pay takes ['amount']"),
        ({**AMOUNT, "additionalProperties": True}, {"amount": 5, "to": "x"}, None),
        (
            {**AMOUNT, "additionalProperties": {"type": "integer"}},
            {"amount": 5, "to": "x"},
            "invalid arguments for pay: to: 'x' is not of type 'integer'",
        ),
        ({**AMOUNT, "patternProperties": {"^x_": {}}}, {"amount": 1, "x_a": 2}, None),
        (
            AMOUNT,
            {"amount": "y" * 5000},
            "invalid arguments for pay: amount: '" + "y" * 196 + "...",
        ),
        (
            {
                "type": "object",
                "properties": {"to": {"$ref": "#/$defs/Account"}},
                "$defs": {"Account": {"type": "object", "properties": {"id": {"type": "string"}}}},
            },
            {"to": {"id": 7}},
            "invalid arguments for pay: to.id: 7 is not of type 'string'",
        ),
        (
            {"type": "object", "properties": {"amount": {"type": "nope"}}},
            {"amount": 1},
            "cannot check the arguments of pay: its schema is invalid: 'nope' is not valid",
        ),
        (
            {"type": "object", "properties": {"to": {"$ref": "https://example.invalid/s"}}},
            {"to": 1},
            "cannot check the arguments of pay: its schema is invalid: ",
        ),
    ],
)
def test_json_schema_arguments_are_checked_by_jsonschema(
    schema: dict[str, Any], args: dict[str, Any], says: str | None
) -> None:
    found = tool_args.check_json_args("pay", schema, args)
    if says is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(says)
        assert len(found) < 400


def test_a_graph_builds_its_tools_call_schemas_not_its_first_call() -> None:
    """LangChain builds a tool's model-facing schema on first use (about 1 ms) and keeps it;
    the graph builds them, so no run's first argument check pays for it."""

    @tool
    def fresh(n: int) -> str:
        """A tool no graph has seen."""
        return str(n)

    assert fresh._tool_call_schema_memo is None
    build_graph(ScriptedChatModel(replies=["x"]), [fresh])
    assert fresh._tool_call_schema_memo is not None
