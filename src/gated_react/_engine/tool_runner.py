"""Running one tool call: argument check, timeout, retries, and a JSON-safe, bounded result.

Sync tools run on the deadline module's daemon threads, so a call that hangs past its timeout
is abandoned without keeping the process alive.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import time
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ValidationError

from gated_react._engine.deadline import DeadlinePassed, acall_within, await_within, call_within
from gated_react._engine.storable import Unstorable, clean_text, plain
from gated_react.errors import GatedReactError, validation_line

KEY_PARAM = "idempotency_key"


class ToolTimeout(GatedReactError):
    """The tool did not return within its timeout."""


class ToolExit(GatedReactError):
    """The tool raised ``SystemExit`` (or another non-error exit): a failed call, never the
    end of the process that runs the agent."""


def _contained(exc: BaseException, tool: BaseTool) -> BaseException:
    """Errors pass through; a tool's exit is turned into an error. Ctrl-C and cancellation
    still propagate: they are the user's, not the tool's."""
    if isinstance(exc, Exception | KeyboardInterrupt | asyncio.CancelledError):
        return exc
    return ToolExit(f"{tool.name} raised {type(exc).__name__}: {str(exc)[:200]}")


def check_args(tool: BaseTool, args: dict[str, Any]) -> str | None:
    """Why ``args`` do not fit the tool's schema (unknown keys included), or None when they do.

    The model-facing schema names the allowed keys; the full argument model (with its field
    validators) checks the values, except for injected arguments the model never supplies.
    """
    visible = tool.tool_call_schema
    if not (isinstance(visible, type) and issubclass(visible, BaseModel)):
        required = visible.get("required", []) if isinstance(visible, dict) else []
        missing = [name for name in required if name not in args]
        return f"missing arguments {missing[:5]} for {tool.name}" if missing else None
    known = set(visible.model_fields)
    unknown = sorted(set(args) - known)
    if unknown:
        return f"unknown arguments {unknown[:5]}; {tool.name} takes {sorted(known)}"
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


def accepts_key(tool: BaseTool) -> bool:
    """Whether the tool declares an ``idempotency_key`` parameter (usually an InjectedToolArg)."""
    schema = tool.get_input_schema()
    if hasattr(schema, "model_fields"):
        return KEY_PARAM in schema.model_fields
    return KEY_PARAM in getattr(schema, "__fields__", {})  # pydantic v1 argument schemas


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): exponential with full jitter."""
    base: float = min(0.1 * 2 ** (attempt - 1), 5.0)
    return base / 2 + random.uniform(0, base / 2)


def invoke(
    tool: BaseTool, args: dict[str, Any], config: RunnableConfig, timeout: float, retries: int
) -> Any:
    """Run the tool (sync), retrying ``retries`` times; raises ToolTimeout or the tool's error."""
    for attempt in range(retries + 1):
        try:
            return _invoke_once(tool, args, config, timeout)
        except Exception:
            if attempt == retries:
                raise
            time.sleep(backoff(attempt + 1))
    raise AssertionError("unreachable")


async def ainvoke(
    tool: BaseTool, args: dict[str, Any], config: RunnableConfig, timeout: float, retries: int
) -> Any:
    """Async twin of ``invoke``; natively async tools are awaited, sync ones run on a thread."""
    for attempt in range(retries + 1):
        try:
            return await _ainvoke_once(tool, args, config, timeout)
        except Exception:
            if attempt == retries:
                raise
            await asyncio.sleep(backoff(attempt + 1))
    raise AssertionError("unreachable")


def _invoke_once(
    tool: BaseTool, args: dict[str, Any], config: RunnableConfig, timeout: float
) -> Any:
    try:
        return call_within(lambda: _call(tool, args, config), timeout)
    except DeadlinePassed:
        raise ToolTimeout(f"{tool.name} did not return within {timeout:g} s") from None


async def _ainvoke_once(
    tool: BaseTool, args: dict[str, Any], config: RunnableConfig, timeout: float
) -> Any:
    try:
        if _is_async(tool):
            return await await_within(tool.ainvoke(args, config), timeout)
        return await acall_within(lambda: _call(tool, args, config), timeout)
    except DeadlinePassed:
        raise ToolTimeout(f"{tool.name} did not return within {timeout:g} s") from None


def _call(tool: BaseTool, args: dict[str, Any], config: RunnableConfig) -> Any:
    """The call a worker thread makes; a tool's exit becomes an error there."""
    try:
        if isinstance(tool, StructuredTool) and tool.func is None and tool.coroutine is not None:
            return asyncio.run(tool.ainvoke(args, config))  # an async-only tool under sync invoke
        return tool.invoke(args, config)
    except BaseException as exc:
        contained = _contained(exc, tool)
        if contained is exc:
            raise
        raise contained from None


def _is_async(tool: BaseTool) -> bool:
    if isinstance(tool, StructuredTool):
        return tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


def to_observation(value: Any, limit: int, secrets: tuple[str, ...] = ()) -> Any:
    """The tool's result as storable JSON data (``untrusted.plain``, ``secrets`` masked), cut
    with a visible marker when its text exceeds ``limit``. Whatever a tool returns, this never
    raises."""
    try:
        text = json.dumps(value, default=_jsonable, ensure_ascii=False)
        data = plain(json.loads(text), secrets=secrets)
    except Unstorable:  # huge integers or deep nesting: the model reads the same JSON as text
        data = clean_text(text, secrets)
    except Exception:  # circular, unencodable, or a __repr__ that raises
        data = clean_text(_shown(value), secrets)
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    if len(text) <= limit:
        return data
    marker = f" ...[cut: {len(text)} chars, first {limit} shown]"
    return text[:limit] + marker


def _shown(value: Any) -> str:
    try:
        return clean_text(repr(value))
    except Exception:
        return f"<{type(value).__name__} object that cannot be shown>"


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return repr(value)[:1000]
