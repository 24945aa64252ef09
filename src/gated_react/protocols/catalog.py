"""Tool descriptions for prompts and JSON schemas, built from the tools' own argument schemas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool


def args_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of what the model must supply (injected arguments excluded, refs inlined)."""
    params = convert_to_openai_tool(tool)["function"].get("parameters") or {}
    schema = {"type": "object", "properties": {}, **params}
    schema.pop("title", None)
    schema.pop("description", None)
    return schema


def describe(tools: Sequence[BaseTool]) -> list[dict[str, Any]]:
    """A compact catalog: name, description and argument properties of each tool."""
    entries = []
    for tool in tools:
        schema = args_schema(tool)
        entries.append(
            {
                "name": tool.name,
                "description": (tool.description or "").strip()[:500],
                "args": schema.get("properties", {}),
                "required": schema.get("required", []),
            }
        )
    return entries


def required_params(tool: BaseTool) -> list[str]:
    """The parameters the model must supply."""
    return list(args_schema(tool).get("required", []))


def all_params(tool: BaseTool) -> list[str]:
    """Every parameter the model may supply."""
    return list(args_schema(tool).get("properties", {}))
