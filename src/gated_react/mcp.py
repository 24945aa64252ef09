"""Tools from MCP servers, under the gate: ``load_tools(config)`` starts the servers a config
names (stdio by command, streamable HTTP by URL, through ``langchain-mcp-adapters``) and gives
their tools as LangChain tools named ``<server>__<tool>`` that run under ``invoke`` and
``ainvoke``; ``mcp_policy`` turns what the servers say about their tools into approvals.

Needs the ``mcp`` extra: ``pip install 'gated-react[mcp]'``.

Defaults, from each tool's MCP annotations (hints a server gives about itself):

- ``metadata["idempotent"]`` is True when ``readOnlyHint`` or ``idempotentHint`` is true: the
  run may repeat the call after a crash, and ``Policy.tool_retries`` applies.
- ``metadata["destructive"]`` is True unless ``readOnlyHint`` is true or ``destructiveHint`` is
  false (MCP's own default for a tool that says nothing); ``mcp_policy`` makes such tools ask
  for approval unless ``trust`` names them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool
from pydantic import PrivateAttr

from gated_react.redact import mask_secrets
from gated_react.tools._mcp_config import (
    Config,
    MCPConfigError,
    MCPError,
    check_unique,
    read_configs,
    tool_name,
)

if TYPE_CHECKING:
    from langchain_core.messages import ToolMessage

    from gated_react.policy import Policy
    from gated_react.tools._mcp_session import Servers

__all__ = [
    "MCPConfigError",
    "MCPError",
    "MCPTool",
    "MCPToolError",
    "MCPTools",
    "aload_tools",
    "load_tools",
    "mcp_policy",
]

STARTUP_TIMEOUT = 30.0
CALL_TIMEOUT = 120.0
MAX_RESULT_CHARS = 1_000_000


class MCPToolError(MCPError):
    """The server ran the call and reported that it failed (``isError``)."""


class MCPTool(BaseTool):
    """One tool of an MCP server; its session is held by the ``MCPTools`` it came with."""

    server: str
    """The server's name in the config."""
    remote_name: str
    """The tool's name on its server."""
    max_result_chars: int = MAX_RESULT_CHARS
    """A larger reply is refused (an error), not passed on."""
    _servers: Servers = PrivateAttr()
    _remote: BaseTool = PrivateAttr()

    def _run(self, **args: Any) -> Any:
        return self._result(self._servers.call(self.server, self._remote, args))

    async def _arun(self, **args: Any) -> Any:
        return self._result(await self._servers.acall(self.server, self._remote, args))

    def _result(self, message: ToolMessage) -> Any:
        """The reply as plain data: its structured content if it has one, else its text (a
        list when there are several parts); a failed call raises ``MCPToolError``. The values
        of the server's env and headers are masked wherever they appear."""
        parts = [_part(block) for block in _blocks(message.content)]
        structured = (message.artifact or {}).get("structured_content")
        # What is passed on is counted, once: a server that sends structured content usually
        # sends its JSON as text too, and only one of them is kept.
        if structured is not None:
            size = len(json.dumps(structured, default=str))
        else:
            size = sum(len(part) for part in parts)
        if size > self.max_result_chars:
            raise MCPError(
                f"{self.name} replied with {size:,} characters, more than max_result_chars "
                f"{self.max_result_chars:,}"
            )
        secrets = self._servers.secrets(self.server)
        if message.status == "error":
            text = " ".join(parts)[:2000] or f"{self.name} failed (no message)"
            raise MCPToolError(mask_secrets(text, secrets))
        if structured is not None:
            return _masked(structured, secrets)
        return _masked(parts[0] if len(parts) == 1 else parts, secrets)


def _masked(value: Any, secrets: tuple[str, ...]) -> Any:
    if not secrets:
        return value
    if isinstance(value, str):
        return mask_secrets(value, secrets)
    if isinstance(value, list):
        return [_masked(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: _masked(item, secrets) for key, item in value.items()}
    return value


def _blocks(content: Any) -> list[Any]:
    return [content] if isinstance(content, str) else list(content)


def _part(block: Any) -> str:
    if isinstance(block, str):
        return block
    if block.get("type") == "text":
        return str(block.get("text", ""))
    data = block.get("base64") or block.get("url") or ""
    return f"<{block.get('type')} {block.get('mime_type') or ''}, {len(data)} chars>"


class MCPTools(list[MCPTool]):
    """The tools of some MCP servers, and the sessions they run on: close them (or use ``with``)
    when done; the servers stop at interpreter exit otherwise."""

    def __init__(self, tools: Iterable[MCPTool], servers: Servers) -> None:
        super().__init__(tools)
        self._servers = servers

    def close(self) -> None:
        """Close the sessions; stdio servers exit (or are killed after a few seconds)."""
        self._servers.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self._servers.close)

    def __enter__(self) -> MCPTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> MCPTools:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def load_tools(
    config: Config | Sequence[Config],
    *,
    startup_timeout: float = STARTUP_TIMEOUT,
    call_timeout: float = CALL_TIMEOUT,
    max_result_chars: int = MAX_RESULT_CHARS,
) -> MCPTools:
    """Start the servers of ``config`` (a mapping, a JSON file's path, or a list of them) and
    return their tools. A server that cannot start, or does not answer within
    ``startup_timeout`` seconds, is an ``MCPError``, and none is left running."""
    servers = _servers(config, startup_timeout, call_timeout)
    try:
        return _tools(servers.start(), servers, max_result_chars)
    except BaseException:
        servers.close()
        raise


async def aload_tools(
    config: Config | Sequence[Config],
    *,
    startup_timeout: float = STARTUP_TIMEOUT,
    call_timeout: float = CALL_TIMEOUT,
    max_result_chars: int = MAX_RESULT_CHARS,
) -> MCPTools:
    """Async ``load_tools``."""
    servers = _servers(config, startup_timeout, call_timeout)
    try:
        return _tools(await servers.astart(), servers, max_result_chars)
    except BaseException:
        await asyncio.to_thread(servers.close)
        raise


def _servers(config: Config | Sequence[Config], startup: float, call: float) -> Servers:
    specs = read_configs(config)
    try:
        import langchain_mcp_adapters  # noqa: F401
        import mcp  # noqa: F401

        from gated_react.tools._mcp_session import Servers
    except ImportError:
        raise MCPError("MCP tools need the mcp extra: pip install 'gated-react[mcp]'") from None
    return Servers(specs, startup_timeout=startup, call_timeout=call)


def _tools(found: list[tuple[str, BaseTool]], servers: Servers, limit: int) -> MCPTools:
    check_unique([(tool_name(server, tool.name), server, tool.name) for server, tool in found])
    return MCPTools((_wrap(server, tool, servers, limit) for server, tool in found), servers)


def _wrap(server: str, remote: BaseTool, servers: Servers, limit: int) -> MCPTool:
    hints = {k: v for k, v in (remote.metadata or {}).items() if v is not None and k != "_meta"}
    read_only = hints.get("readOnlyHint") is True
    tool = MCPTool(
        name=tool_name(server, remote.name),
        description=remote.description or f"{remote.name} (MCP server {server})",
        args_schema=remote.args_schema,
        metadata={
            "idempotent": read_only or hints.get("idempotentHint") is True,
            "destructive": not read_only and hints.get("destructiveHint") is not False,
            "mcp_server": server,
            "mcp_tool": remote.name,
            "mcp_annotations": hints,
        },
        server=server,
        remote_name=remote.name,
        max_result_chars=limit,
    )
    tool._servers, tool._remote = servers, remote
    return tool


def _destructive(tools: Iterable[BaseTool]) -> frozenset[str]:
    """The names of the tools marked ``metadata["destructive"]``."""
    return frozenset(t.name for t in tools if (t.metadata or {}).get("destructive") is True)


def mcp_policy(
    tools: Iterable[BaseTool], policy: Policy | None = None, *, trust: Iterable[str] = ()
) -> Policy:
    """``policy`` (default ``Policy()``) with every destructive tool in ``require_approval``,
    but those ``trust`` names; what ``policy`` already requires stays required."""
    from gated_react.policy import Policy

    tools, trusted, base = list(tools), frozenset(trust), policy or Policy()
    names = {tool.name for tool in tools}
    unknown = sorted(trusted - names)
    if unknown:
        raise MCPConfigError(
            f"trust: no tool named {', '.join(unknown)}; tools: {', '.join(sorted(names))}"
        )
    asked = base.require_approval | (_destructive(tools) - trusted)
    return base.replace(require_approval=asked)
