"""What an assistant can set from LangGraph Studio: the model and every policy field, flat.

Each field is built from the library's own ``Policy`` and ``Budget`` fields (type, bounds, default
and description), so an assistant with an empty context runs exactly ``Policy()``.
``answer_schema`` is Python-only (a pydantic class) and not offered here.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from gated_react.policy import Budget, Policy

_BUDGET = frozenset(Budget.model_fields)
_POLICY = frozenset(Policy.model_fields) - {"budget", "answer_schema"}
DEFAULT_WORKSPACE = "docs/studio-workspace"


class _Context(BaseModel):
    """The model and the policy of one assistant."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    model: str | None = None
    """Model name sent to the server; empty uses OPENAI_MODEL (default gpt-4.1-mini)."""
    base_url: str | None = None
    """OpenAI-compatible server (vLLM, llama.cpp, Ollama); empty uses OPENAI_BASE_URL or OpenAI."""

    def policy(self) -> Policy:
        """The ``Policy`` these fields describe."""
        budget = Budget(**self.model_dump(include=set(_BUDGET)))
        return Policy(budget=budget, **self.model_dump(include=set(_POLICY)))


def _library_fields() -> dict[str, Any]:
    """Every Budget and Policy field with its own type, bounds, default and description, so
    the Studio form can never drift from the library."""
    fields: dict[str, Any] = {}
    for name, info in Budget.model_fields.items():
        field = copy.copy(info)
        field.description = f"Budget: {info.description}"
        fields[name] = (info.annotation, field)
    for name in sorted(_POLICY, key=list(Policy.model_fields).index):
        info = Policy.model_fields[name]
        fields[name] = (info.annotation, copy.copy(info))
    return fields


StudioContext = create_model("StudioContext", __base__=_Context, **_library_fields())


class RefundContext(StudioContext):
    """The refund agent: support tools (get_user_profile, get_user_billing, search_policy)."""


class WorkbenchContext(StudioContext):
    """The workbench agent: calculate, read_file, list_files and run_tests."""

    workspace_root: str = DEFAULT_WORKSPACE
    """Folder the workspace tools are confined to; relative paths start at the server's folder."""

    def workspace_path(self) -> Path:
        """The workspace folder, resolved against the server's working directory."""
        return (Path.cwd() / Path(self.workspace_root).expanduser()).resolve()
