"""What an assistant can set from LangGraph Studio: the model and every policy field, flat.

Each field has the library's type, bounds and default (``tests/test_studio_context.py`` compares
them field by field with ``Policy`` and ``Budget``), so an assistant with an empty context runs
exactly ``Policy()``. ``answer_schema`` is Python-only (a pydantic class) and not offered here.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gated_react.policy import Budget, LoopMode, OnError, OnInvalid, Policy, Protocol

_BUDGET = frozenset(Budget.model_fields)
_POLICY = frozenset(Policy.model_fields) - {"budget", "answer_schema"}
DEFAULT_WORKSPACE = "docs/studio-workspace"


class StudioContext(BaseModel):
    """The model and the policy of one assistant."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    model: str | None = None
    """Model name sent to the server; empty uses OPENAI_MODEL (default gpt-4.1-mini)."""
    base_url: str | None = None
    """OpenAI-compatible server (vLLM, llama.cpp, Ollama); empty uses OPENAI_BASE_URL or OpenAI."""
    protocol: Protocol = "tools"
    """How the model states its action: native tool calls, one JSON object, or ReAct text."""
    allow: frozenset[str] | None = None
    """Tools the model may call (deny by default); empty allows every tool of this graph."""
    require_approval: frozenset[str] = frozenset()
    """Tools whose calls pause the run until a human approves, edits or rejects them."""
    max_steps: int = Field(default=8, ge=1)
    """Budget: model decisions per run (the last one may still answer)."""
    max_tool_calls: int = Field(default=6, ge=0)
    """Budget: tool calls per run."""
    max_seconds: float = Field(default=20.0, gt=0)
    """Budget: active seconds (model and tool time); paused time is free."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Budget: total model tokens per run; empty means unlimited."""
    tool_limits: dict[str, int] = Field(default_factory=dict)
    """Budget: per-tool call caps, e.g. {"search_policy": 2}."""
    loop_detection: LoopMode = "exact"
    """Stop on a repeated call (same tool and arguments): exact, normalized, or off."""
    json_schema: bool = True
    """JSON protocol: request a schema built from the allowed tools (else plain json_object)."""
    schema_max_string: int | None = Field(default=None, ge=1)
    """JSON protocol: cap string lengths in that schema (helps small local models)."""
    schema_max_integer: int | None = Field(default=None, ge=1)
    """JSON protocol: cap integer magnitudes in that schema."""
    context_steps: int | None = Field(default=3, ge=0)
    """Recent steps the model sees in full; empty sends the whole history."""
    max_observation_chars: int = Field(default=4000, ge=100)
    """Longer tool results are cut to this many characters with a visible marker."""
    tool_timeout_seconds: float = Field(default=30.0, gt=0)
    """Default time a tool call may take."""
    tool_timeouts: dict[str, float] = Field(default_factory=dict)
    """Per-tool timeouts in seconds, e.g. {"run_tests": 60}."""
    tool_retries: int = Field(default=0, ge=0, le=10)
    """Extra attempts for a failing idempotent tool (exponential backoff with jitter)."""
    on_tool_error: OnError = "stop"
    """A refused, failed or timed-out call: stop the run, or show the model the error."""
    on_invalid_action: OnInvalid = "stop"
    """A malformed model reply: stop the run, or send a format reminder and ask again."""
    max_invalid_retries: int = Field(default=2, ge=0, le=10)
    """Reminders in a row a malformed reply may get before the run stops."""

    def policy(self) -> Policy:
        """The ``Policy`` these fields describe."""
        budget = Budget(**self.model_dump(include=set(_BUDGET)))
        return Policy(budget=budget, **self.model_dump(include=set(_POLICY)))


class RefundContext(StudioContext):
    """The refund agent: support tools (get_user_profile, get_user_billing, search_policy)."""


class WorkbenchContext(StudioContext):
    """The workbench agent: calculate, read_file, list_files and run_tests."""

    workspace_root: str = DEFAULT_WORKSPACE
    """Folder the workspace tools are confined to; relative paths start at the server's folder."""

    def workspace_path(self) -> Path:
        """The workspace folder, resolved against the server's working directory."""
        return (Path.cwd() / Path(self.workspace_root).expanduser()).resolve()
