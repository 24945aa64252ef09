"""What a CLI run is started with: toolkits, MCP configs, policy and model, from the command line.

``run`` takes them from its flags, and so do ``resume`` and ``answer``: they are given again,
never read back from the store (whoever can write the store could otherwise grant a call an
approval's place, start an MCP server's command or send the API key elsewhere). They are
recorded in the run's checkpoints only to be shown (``show``, ``runs``, the line that asks for
them again). Never holds a secret: no API key, and no URL that carries credentials."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from gated_react.cli.exits import CliError, user_errors
from gated_react.policy import OnBudget, Protocol
from gated_react.records.run_listing import METADATA_KEY, started_with
from gated_react.redact import redact

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from gated_react.examples import Example
    from gated_react.mcp import MCPTools
    from gated_react.policy import Budget, Policy

_OPENED: dict[tuple[str, ...], MCPTools] = {}
"""The MCP tools this process started, by config files: a command starts them once (checking
the flags, building the graph) and stops them with ``close_mcp`` when it ends."""


def close_mcp() -> None:
    """Stop every MCP server this process started (stdio servers are its children)."""
    while _OPENED:
        _OPENED.popitem()[1].close()


class RunOptions(BaseModel):
    """The choices that shape a run: toolkits, policy and the model named on the command line."""

    model_config = ConfigDict(extra="ignore", frozen=True, use_attribute_docstrings=True)

    toolkits: list[str] = ["support"]
    """Shipped toolkits to load."""
    allow: list[str] | None = None
    """Tools the model may call; None: every tool of the toolkits."""
    approve: list[str] = []
    """Tools whose calls wait for a human."""
    mcp: list[str] = []
    """MCP config files (absolute paths) whose servers' tools join the toolkits'."""
    trust: list[str] = []
    """Destructive MCP tools that run without asking (``mcp_policy``'s ``trust``)."""
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
    max_cost: float | None = None
    """See ``Budget.max_cost``."""
    on_budget: OnBudget | None = None
    """See ``Policy.on_budget``; None keeps the policy default (stop)."""
    workspace: str | None = None
    """Root folder of the workspace toolkit."""
    database: str | None = None
    """SQLite file of the sql toolkit."""
    model: str | None = None
    """``--model`` as given."""
    base_url: str | None = None
    """``--base-url`` as given (left out when it carries credentials)."""

    def budget(self) -> Budget:
        """The run's budget (it never depends on the tools: no MCP server starts for it)."""
        return self._base_policy().budget

    def policy(self) -> Policy:
        """The run's policy. With MCP configs, destructive MCP tools ask for approval unless
        ``--trust-tool`` names them; that needs their tools, so ``tools()`` must come first
        (``graph_for`` calls it first; only the budget is read without it)."""
        base = self._base_policy()
        opened = _OPENED.get(tuple(self.mcp)) if self.mcp else None
        if opened is None:
            return base
        from gated_react.mcp import mcp_policy

        with user_errors():
            return mcp_policy(opened, base, trust=self.trust)

    def _base_policy(self) -> Policy:
        from gated_react.policy import Policy
        from gated_react.tools import toolkit_timeouts

        limits = {
            "max_steps": self.max_steps,
            "max_tool_calls": self.max_tool_calls,
            "max_seconds": self.max_seconds,
            "max_tokens": self.max_tokens,
            "max_cost": self.max_cost,
            "on_budget": self.on_budget,
        }
        given: dict[str, Any] = {k: v for k, v in limits.items() if v is not None}
        if self.example:
            base = self._example().policy()
        elif self.local:  # JSON with a capped schema, bounded replies, time for a slow CPU model
            from gated_react.hosting.local import local_policy

            base = local_policy()
        else:
            base = Policy()
        if self.protocol is not None:
            given["protocol"] = self.protocol
        if not self.example:
            given["tool_timeouts"] = toolkit_timeouts(self.toolkits, base)
        allow = None if self.allow is None else frozenset(self.allow)
        return base.replace(allow=allow, require_approval=frozenset(self.approve), **given)

    def tools(self) -> list[BaseTool]:
        """The tools of every toolkit and MCP config; unknown toolkits or tool names, and MCP
        servers that fail to start, are a ``CliError``. MCP servers start once per process
        and run until ``close_mcp()``."""
        tools = self._toolkit_tools()
        remote = self._mcp_tools() if self.mcp else []
        tools.extend(remote)
        known = {tool.name for tool in tools}
        unknown = self._base_policy().unknown_tools(known)  # build_graph's check, flag-named
        for field, flag in (("allow", "--allow"), ("require_approval", "--approve-tool")):
            if field in unknown:
                sources = [f"toolkit(s) {', '.join(self.toolkits)}"] if self.toolkits else []
                sources += [f"MCP config {path}" for path in self.mcp]
                raise CliError(
                    f"{flag}: no tool named {', '.join(unknown[field])} in "
                    f"{' or '.join(sources)}; tools: {', '.join(sorted(known))}"
                )
        untrusted = sorted(set(self.trust) - {tool.name for tool in remote})
        if untrusted:
            names = ", ".join(sorted(tool.name for tool in remote)) or "none (no --mcp)"
            raise CliError(
                f"--trust-tool: no MCP tool named {', '.join(untrusted)}; MCP tools: {names}"
            )
        return tools

    def _toolkit_tools(self) -> list[BaseTool]:
        from gated_react.tools import load_toolkit

        if self.example:
            return self._example().tools(Path(self.example_dir or "."))
        tools: list[BaseTool] = []
        for name in dict.fromkeys(self.toolkits):
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
        return tools

    def _mcp_tools(self) -> list[BaseTool]:
        key = tuple(self.mcp)
        if key not in _OPENED:
            from gated_react.mcp import load_tools

            with user_errors():  # a bad config or a server that fails to start: one line
                _OPENED[key] = load_tools(list(self.mcp))
        return list(_OPENED[key])

    def _example(self) -> Example:
        from gated_react import examples

        try:
            return examples.get(self.example or "")
        except examples.UnknownExample as exc:
            raise CliError(str(exc)) from None

    def metadata(self) -> dict[str, str]:
        """The options as the run's checkpoints record them, to be shown (never obeyed)."""
        return {METADATA_KEY: self.model_dump_json(exclude_defaults=True)}

    @classmethod
    def given(
        cls,
        given: Mapping[str, Any],
        *,
        local: bool,
        example_dir: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
    ) -> RunOptions:
        """The options the run flags (``flags.RUN_OPTIONS``, None when not given) say."""
        mcp = given.get("mcp") or []
        protocol, on_budget = given.get("protocol"), given.get("on_budget")
        paths = {key: given.get(key) for key in ("workspace", "database", "model_file")}
        return cls(
            local=local,
            model_file=str(paths["model_file"]) if paths["model_file"] else None,
            example=given.get("example"),
            example_dir=example_dir,
            toolkits=given.get("toolkit") or ([] if mcp else ["support"]),
            allow=given.get("allow"),
            approve=given.get("approve_tool") or [],
            mcp=[str(Path(path).expanduser().resolve()) for path in mcp],
            trust=given.get("trust_tool") or [],
            protocol=str(protocol) if protocol else None,
            **{name: given.get(name) for name in _LIMITS},
            on_budget=str(on_budget) if on_budget else None,
            workspace=str(paths["workspace"]) if paths["workspace"] else None,
            database=str(paths["database"]) if paths["database"] else None,
            model=model,
            base_url=base_url if base_url and redact(base_url) == base_url else None,
        )

    def flags(self) -> list[str]:
        """The command-line options that give these options again (for ``resume``); a base
        URL that carries credentials is left out (never recorded)."""
        out: list[str] = []
        if self.example:
            out += ["--example", self.example]
        else:
            out += [flag for name in self.toolkits for flag in ("--toolkit", name)]
        out += [flag for path in self.mcp for flag in ("--mcp", path)]
        out += [flag for name in self.allow or () for flag in ("--allow", name)]
        out += [flag for name in self.approve for flag in ("--approve-tool", name)]
        out += [flag for name in self.trust for flag in ("--trust-tool", name)]
        shown = (*_LIMITS, "on_budget", "protocol", "workspace", "database", "model_file",
                 "model", "base_url")  # fmt: skip
        for name in shown:
            value = getattr(self, name)
            if value is not None:
                out += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float)
                        else str(value)]  # fmt: skip
        return out


_LIMITS = ("max_steps", "max_tool_calls", "max_seconds", "max_tokens", "max_cost")


def recorded(metadata: Mapping[str, Any] | None) -> RunOptions | None:
    """What a run's checkpoints say it was started with, to be shown; None when they say
    nothing this version can read (a run started by the library, or damaged metadata)."""
    found = started_with(metadata)
    if found is None:
        return None
    try:
        return RunOptions.model_validate(found)
    except ValueError:
        return None
