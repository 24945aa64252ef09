"""Tool metadata helpers."""

from __future__ import annotations

from typing import TypeVar

from langchain_core.tools import BaseTool

T = TypeVar("T", bound=BaseTool)


def idempotent(tool: T) -> T:
    """Mark a tool safe to run twice (``metadata={"idempotent": True}``); use above ``@tool``."""
    tool.metadata = {**(tool.metadata or {}), "idempotent": True}
    return tool
