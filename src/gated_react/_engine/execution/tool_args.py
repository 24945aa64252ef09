"""A tool call's arguments against its tool: the checks the gate and execute make before a call
runs (unknown keys, the schema's types and validators, a JSON schema from an MCP server), in
the words ``ToolNode`` gives the model where a tool hook sees them, and whether a tool takes
its call's idempotency key.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolInvocationError
from pydantic import BaseModel, ValidationError

from gated_react.errors import exception_line, shorten, validation_line

KEY_PARAM = "idempotency_key"


def build_schemas(tools: Iterable[BaseTool]) -> None:
    """Each tool's model-facing schema, built now, when the graph is: LangChain builds it on
    first use and keeps it on the tool (about 1 ms a tool), and ``check_args`` reads it at every
    call, so a run's first call would otherwise pay for it. (A model's ``bind_tools`` builds
    the same schemas; one that binds nothing, a scripted model, leaves them to here.)"""
    for tool in tools:
        with contextlib.suppress(Exception):  # a schema that will not build fails its calls
            _ = tool.tool_call_schema


def check_args(tool: BaseTool, args: dict[str, Any]) -> str | None:
    """Why ``args`` do not fit the tool's schema (unknown keys included), or None when they do.

    A pydantic schema: the model-facing schema names the allowed keys; the full argument model
    (with its field validators) checks the values, except for injected arguments the model
    never supplies. A JSON schema (MCP servers give one): ``check_json_args``.
    """
    visible = tool.tool_call_schema
    if isinstance(visible, dict):
        return check_json_args(tool.name, visible, args)
    if not (isinstance(visible, type) and issubclass(visible, BaseModel)):
        return None
    known = set(visible.model_fields)
    unknown = sorted(set(args) - known)
    if unknown:
        return _unknown(tool.name, unknown, known)
    full = tool.args_schema if isinstance(tool.args_schema, type) else visible
    try:
        full.model_validate(args)  # type: ignore[union-attr]
    except ValidationError as exc:
        errors = [
            e for e in exc.errors() if not (e["type"] == "missing" and e["loc"][0] not in known)
        ]
        if errors:
            problems = validation_line(errors, root="args", limit=3)
            return f"invalid arguments for {tool.name}: {problems}"
    return None


def invocation_error(tool: BaseTool, args: dict[str, Any]) -> str | None:
    """Why ``args`` do not fit the tool, worded as LangGraph's ``ToolNode`` words it for the
    model (what ``create_agent`` shows), else as ``check_args`` does; None when they fit."""
    visible, full = tool.tool_call_schema, tool.args_schema
    if isinstance(visible, type) and issubclass(visible, BaseModel) and isinstance(full, type):
        try:
            full.model_validate(args)  # type: ignore[union-attr]
        except ValidationError as exc:
            known = set(visible.model_fields)
            errors = [e for e in exc.errors() if e["loc"] and e["loc"][0] in known]
            if errors:
                return ToolInvocationError(tool.name, exc, args, errors).message
    return check_args(tool, args)


def check_json_args(name: str, schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """Why ``args`` do not fit the JSON schema of tool ``name``, or None, by ``jsonschema``.

    Keys the schema does not name are refused, as they are for every other tool, unless the
    schema itself says which other keys it takes (``additionalProperties`` or
    ``patternProperties``): JSON Schema's own default would let them through to the server.
    A schema that cannot be checked refuses every call.
    """
    known = set(schema.get("properties") or {})
    if not {"additionalProperties", "patternProperties"} & set(schema):
        unknown = sorted(set(args) - known)
        if unknown:
            return _unknown(name, unknown, known)
    try:
        import jsonschema

        validator = jsonschema.validators.validator_for(schema)
        validator.check_schema(schema)
        errors = list(itertools.islice(validator(schema).iter_errors(args), 3))
    except ImportError:
        return f"cannot check the arguments of {name}: pip install 'gated-react[mcp]'"
    except Exception as exc:  # a schema that is not one, or a $ref that resolves nowhere
        why = shorten(exception_line(exc, first_only=True), 200)
        return f"cannot check the arguments of {name}: its schema is invalid: {why}"
    problems = [
        {"loc": tuple(error.absolute_path), "msg": shorten(error.message, 200)} for error in errors
    ]
    if problems:
        return f"invalid arguments for {name}: {validation_line(problems, root='args')}"
    return None


def _unknown(name: str, unknown: list[str], known: set[str]) -> str:
    return f"unknown arguments {unknown[:5]}; {name} takes {sorted(known)}"


def accepts_key(tool: BaseTool) -> bool:
    """Whether the tool declares an ``idempotency_key`` parameter (usually an InjectedToolArg)."""
    schema = tool.get_input_schema()
    if hasattr(schema, "model_fields"):
        return KEY_PARAM in schema.model_fields
    return KEY_PARAM in getattr(schema, "__fields__", {})  # pydantic v1 argument schemas
