"""What a CLI run was started with, recorded in its checkpoints so ``resume`` rebuilds the same
tools and policy. Never holds a secret: no API key, and no URL that carries credentials."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from gated_react.cli.exits import CliError
from gated_react.policy import Protocol

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from gated_react.examples import Example
    from gated_react.policy import Policy

METADATA_KEY = "gated_react_run"
"""Checkpoint metadata key; LangGraph stores only scalar metadata, so the value is JSON text."""


class RunOptions(BaseModel):
    """The choices that shape a run: toolkits, policy and the model named on the command line."""

    model_config = ConfigDict(extra="ignore", frozen=True, use_attribute_docstrings=True)

    toolkits: list[str] = ["support"]
    """Shipped toolkits to load."""
    allow: list[str] | None = None
    """Tools the model may call; None: every tool of the toolkits."""
    approve: list[str] = []
    """Tools whose calls wait for a human."""
    protocol: Protocol | None = None
    """How the model states its action; None: ``tools``, or ``json`` on the local model."""
    local: bool = False
    """The run uses the bundled local model (its policy defaults suit a tiny model)."""
    model_file: str | None = None
    """``--model-file``: another GGUF file for the local model."""
    example: str | None = None
    """``--example``: one of the seed systems (its tools and policy instead of the toolkits)."""
    example_dir: str | None = None
    """The folder the example's files are copied to for this run."""
    max_steps: int | None = None
    """Budget overrides; None keeps the policy default."""
    max_tool_calls: int | None = None
    """See ``Budget.max_tool_calls``."""
    max_seconds: float | None = None
    """See ``Budget.max_seconds``."""
    max_tokens: int | None = None
    """See ``Budget.max_tokens``."""
    workspace: str | None = None
    """Root folder of the workspace toolkit."""
    database: str | None = None
    """SQLite file of the sql toolkit."""
    model: str | None = None
    """``--model`` as given."""
    base_url: str | None = None
    """``--base-url`` as given (left out when it carries credentials)."""

    def policy(self) -> Policy:
        from gated_react.policy import Policy

        limits = {
            "max_steps": self.max_steps,
            "max_tool_calls": self.max_tool_calls,
            "max_seconds": self.max_seconds,
            "max_tokens": self.max_tokens,
        }
        given: dict[str, Any] = {k: v for k, v in limits.items() if v is not None}
        if self.example:
            base = self._example().policy()
        elif self.local:  # JSON with a capped schema, bounded replies, time for a slow CPU model
            from gated_react.local import local_policy

            base = local_policy()
        else:
            base = Policy()
        if self.protocol is not None:
            given["protocol"] = self.protocol
        allow = None if self.allow is None else frozenset(self.allow)
        return base.replace(allow=allow, require_approval=frozenset(self.approve), **given)

    def tools(self) -> list[BaseTool]:
        """The tools of every toolkit; unknown toolkits or tool names are a ``CliError``."""
        from gated_react.tools import load_toolkit

        tools: list[BaseTool] = []
        if self.example:
            tools = self._example().tools(Path(self.example_dir or "."))
        for name in dict.fromkeys([] if self.example else self.toolkits):
            try:
                tools.extend(
                    load_toolkit(
                        name,
                        root=Path(self.workspace) if self.workspace else None,
                        database=Path(self.database) if self.database else None,
                    )
                )
            except (ValueError, OSError) as exc:
                raise CliError(str(exc)) from None
        known = {tool.name for tool in tools}
        unknown = self.policy().unknown_tools(known)  # the check build_graph makes, flag-named
        for field, flag in (("allow", "--allow"), ("require_approval", "--approve-tool")):
            if field in unknown:
                raise CliError(
                    f"{flag}: no tool named {', '.join(unknown[field])} in toolkit(s) "
                    f"{', '.join(self.toolkits)}; tools: {', '.join(sorted(known))}"
                )
        return tools

    def _example(self) -> Example:
        from gated_react import examples

        try:
            return examples.get(self.example or "")
        except examples.UnknownExample as exc:
            raise CliError(str(exc)) from None

    def metadata(self) -> dict[str, str]:
        return {METADATA_KEY: self.model_dump_json(exclude_defaults=True)}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any] | None) -> RunOptions | None:
        raw = (metadata or {}).get(METADATA_KEY)
        if not isinstance(raw, str):
            return None
        try:
            return cls.model_validate(json.loads(raw))
        except ValueError:
            return None
