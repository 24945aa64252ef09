"""The MCP config most clients use, checked: ``{"mcpServers": {name: server}}`` where a server is
``{"command", "args", "env", "cwd"}`` (stdio) or ``{"url", "headers"}`` (streamable HTTP); and
the names its tools get (``<server>__<tool>``, as providers accept them)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gated_react.errors import GatedReactError, exception_line, validation_line

Config = Mapping[str, Any] | str | os.PathLike[str]
"""A config as a mapping, or the path of a JSON file holding one."""

MAX_NAME = 64
"""The longest tool name OpenAI accepts (``^[a-zA-Z0-9_-]{1,64}$``)."""
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")


class MCPError(GatedReactError):
    """An MCP server could not be started or reached, or a call to it failed; one line."""


class MCPConfigError(MCPError, ValueError):
    """The MCP config is missing, malformed, or names servers or tools twice."""


class _Stdio(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    kind: Literal["stdio"] | None = Field(None, alias="type")
    transport: Literal["stdio"] | None = None
    command: str = Field(min_length=1)
    args: list[str] = []
    env: dict[str, str] | None = None
    cwd: str | None = None


class _Http(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    kind: Literal["http", "streamable-http", "streamable_http"] | None = Field(None, alias="type")
    transport: Literal["http", "streamable-http", "streamable_http"] | None = None
    url: str = Field(pattern=r"^https?://\S+$")
    headers: dict[str, str] = {}


@dataclass(frozen=True)
class ServerSpec:
    """One server to start: its name and how to reach it."""

    name: str
    stdio: _Stdio | None = None
    http: _Http | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Values never shown in a message: the server's env and header values."""

    def shown(self) -> str:
        """How the server is reached, for messages (no env or header values)."""
        if self.stdio is not None:
            return f"{self.stdio.command!r}"
        return self.http.url if self.http is not None else "?"


def read_configs(configs: Config | Sequence[Config]) -> list[ServerSpec]:
    """The servers of one config or several (a server named in two is an error)."""
    listed: list[Config] = (
        list(configs)
        if isinstance(configs, Sequence) and not isinstance(configs, str)
        else [configs]
    )
    specs: dict[str, tuple[ServerSpec, str]] = {}
    for config in listed:
        where = "the MCP config" if isinstance(config, Mapping) else f"MCP config {config}"
        for spec in _servers(config, where):
            if spec.name in specs:
                raise MCPConfigError(
                    f"{where}: server {spec.name!r} is already defined in {specs[spec.name][1]}"
                )
            specs[spec.name] = (spec, where)
    if not specs:
        raise MCPConfigError("the MCP config names no servers (mcpServers is empty)")
    return [spec for spec, _ in specs.values()]


def _servers(config: Config, where: str) -> list[ServerSpec]:
    folder = None
    if not isinstance(config, Mapping):
        path = Path(config).expanduser()
        folder = path.resolve().parent
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise MCPConfigError(f"{where}: cannot read it: {exception_line(exc)}") from None
        except ValueError as exc:
            raise MCPConfigError(f"{where}: not valid JSON: {exception_line(exc)}") from None
    servers = config.get("mcpServers") if isinstance(config, Mapping) else None
    if not isinstance(servers, Mapping):
        raise MCPConfigError(f'{where}: expected {{"mcpServers": {{name: server, ...}}}}')
    return [_spec(str(name), raw, where, folder) for name, raw in servers.items()]


def _spec(name: str, raw: Any, where: str, folder: Path | None) -> ServerSpec:
    if not name.strip():
        raise MCPConfigError(f"{where}: a server name is empty")
    if not isinstance(raw, Mapping):
        raise MCPConfigError(f"{where}: server {name!r} must be an object")
    kind = raw.get("type", raw.get("transport"))
    if kind not in (None, "stdio", "http", "streamable-http", "streamable_http"):
        raise MCPConfigError(
            f"{where}: server {name!r}: transport {kind!r} is not supported; "
            "use stdio (command) or streamable HTTP (url)"
        )
    try:
        if "command" in raw:
            stdio = _Stdio.model_validate(raw)
            if folder is not None:  # a config file's servers start beside it, as they do there
                stdio = stdio.model_copy(update={"cwd": str(folder / (stdio.cwd or "."))})
            values = tuple((stdio.env or {}).values())
            return ServerSpec(name=name, stdio=stdio, secrets=values)
        if "url" in raw:
            http = _Http.model_validate(raw)
            return ServerSpec(name=name, http=http, secrets=tuple(http.headers.values()))
    except ValidationError as exc:
        problem = validation_line(exc, root="server", limit=2)
        raise MCPConfigError(f"{where}: server {name!r}: {problem}") from None
    raise MCPConfigError(
        f'{where}: server {name!r} needs "command" (stdio) or "url" (streamable HTTP)'
    )


def tool_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` with every character a provider refuses turned into ``_``; a name
    over 64 characters is cut and ends with a hash of the whole, so it stays unique."""
    name = _NOT_ALLOWED.sub("_", f"{server}__{tool}")
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def check_unique(names: Sequence[tuple[str, str, str]]) -> None:
    """Refuse two tools that would get one name: ``names`` holds (name, server, tool)."""
    seen: dict[str, tuple[str, str]] = {}
    for name, server, tool in names:
        if name in seen:
            first = seen[name]
            raise MCPConfigError(
                f"MCP tools {first[1]!r}/{first[0]!r} and {server!r}/{tool!r} would both be "
                f"named {name!r}; rename one of the servers in the config"
            )
        seen[name] = (tool, server)
