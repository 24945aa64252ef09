"""Graph factories and the durable checkpointer for ``langgraph dev`` (see ``langgraph.json``).

The server calls a factory whenever it needs the graph: to run it (``threads.create_run``,
where ``runtime.execution_runtime.context`` holds the assistant's context merged with the run's),
and to draw it or read a thread (no context). Runs are built from the validated context; every
other use gets the same shape with nothing that could run, so drawing never needs a model.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph_sdk.runtime import ServerRuntime
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from gated_react.errors import GatedReactError, validation_line
from gated_react.graph import build_graph, idle_graph
from gated_react.hosting.otel import setup_tracing
from gated_react.models import chat_model
from gated_react.policy import Budget, Policy
from gated_react.settings import Settings, server_path, studio_workspace
from gated_react.store.checkpointer import aopen_checkpointer
from gated_react.tools import load_toolkit, toolkit_timeouts
from gated_react.tools.confine import is_hidden

Graph = CompiledStateGraph[Any, Any, Any, Any]

# Keys LangGraph itself may mirror from a run's ``configurable`` into its context.
_RESERVED_PREFIXES = ("__", "langgraph_", "checkpoint_")
_RESERVED = frozenset({"thread_id", "run_id", "assistant_id", "graph_id", "user_id"})
_BUDGET = frozenset(Budget.model_fields)
_POLICY = frozenset(Policy.model_fields) - {"budget", "answer_schema"}
DEFAULT_WORKSPACE = studio_workspace()


class _Context(BaseModel):
    """The model and the policy of one assistant."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    model: str | None = None
    """Model name sent to the server; empty uses OPENAI_MODEL (default gpt-4.1-mini)."""
    base_url: str | None = None
    """OpenAI-compatible server (vLLM, llama.cpp, Ollama); empty uses OPENAI_BASE_URL or OpenAI."""

    def policy(self) -> Policy:
        """The ``Policy`` these fields describe."""
        return Policy().replace(**self.model_dump(include=set(_BUDGET | _POLICY)))


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
        return server_path(self.workspace_root)


C = TypeVar("C", bound=StudioContext)


class ContextError(GatedReactError, ValueError):
    """The assistant's context does not validate; the message is one line naming each field."""


async def refund_agent(runtime: ServerRuntime[Any]) -> Graph:
    """Studio's ``refund`` graph: the support toolkit under the assistant's policy."""
    context = read_context(runtime, RefundContext)
    if context is None:
        return drawn(RefundContext)
    # Building touches the disk (imports, the workspace folder): off the server's event loop.
    return await asyncio.to_thread(refund_graph, context)


async def workbench_agent(runtime: ServerRuntime[Any]) -> Graph:
    """Studio's ``workbench`` graph: calculator and workspace tools."""
    context = read_context(runtime, WorkbenchContext)
    if context is None:
        return drawn(WorkbenchContext)
    return await asyncio.to_thread(_served_workbench, context)


def refund_graph(context: RefundContext) -> Graph:
    """The refund agent a context describes (usable without the server too)."""
    return _agent(context, load_toolkit("support"), context.policy())


def workbench_graph(context: WorkbenchContext) -> Graph:
    """The workbench agent a context describes; the workspace confined to its folder."""
    try:
        workspace = load_toolkit("workspace", root=context.workspace_path())
    except ValueError as exc:
        raise ContextError(f"invalid context: workspace_root: {exc}") from None
    policy = context.policy()
    policy = policy.replace(tool_timeouts=toolkit_timeouts(["workspace"], policy))
    return _agent(context, [*load_toolkit("calculator"), *workspace], policy)


def drawn(schema: type[StudioContext]) -> Graph:
    """The graph the server draws and reads threads with: the same nodes and edges, no tools,
    and a model that is never called (no node runs outside ``threads.create_run``)."""
    return idle_graph().copy(update={"context_schema": schema})


@asynccontextmanager
async def checkpointer() -> AsyncIterator[BaseCheckpointSaver[str]]:
    """The dev server's store: ``GATED_REACT_DB``, else the SQLite file in the state folder;
    signed with ``GATED_REACT_STORE_KEY`` if it is set."""
    settings = Settings()
    async with aopen_checkpointer(settings.store_url(), key=settings.store_keys()) as saver:
        yield saver


def read_context(runtime: ServerRuntime[Any], schema: type[C]) -> C | None:
    """The validated context of a run, or None when the server is not about to run the graph."""
    execution = runtime.execution_runtime
    if execution is None:
        return None
    raw: Any = execution.context
    if isinstance(raw, schema):
        return raw
    if raw is not None and not isinstance(raw, Mapping):
        raise ContextError(f"context must be an object, got {type(raw).__name__}")
    data = {key: value for key, value in (raw or {}).items() if not _reserved(str(key))}
    try:
        context = schema.model_validate(data)
    except ValidationError as exc:
        raise ContextError(
            f"invalid context: {validation_line(exc, root='context', show_input=True)}"
        ) from None
    _check_operator_fields(context)
    return context


def _check_operator_fields(context: StudioContext) -> None:
    """Any client of the server writes a run's context, so the API key goes only to a base URL
    the operator named (and, in ``_served_workbench``, the workspace tools only into its
    folders)."""
    if context.base_url is not None and not Settings().may_send_key_to(context.base_url):
        raise ContextError(
            "invalid context: base_url: not a server this one sends its API key to "
            "(OPENAI_BASE_URL, or one in GATED_REACT_STUDIO_BASE_URLS)"
        )


def _served_workbench(context: WorkbenchContext) -> Graph:
    """The workbench a server's run asked for, in a folder the operator named (resolving the
    folder touches the disk: called off the event loop)."""
    folder = context.workspace_path()
    below = [
        folder.relative_to(r).parts for r in Settings().studio_roots() if folder.is_relative_to(r)
    ]
    if not below:
        raise ContextError(
            "invalid context: workspace_root: outside the folders this server lets a context "
            "name (GATED_REACT_STUDIO_WORKSPACE, GATED_REACT_STUDIO_WORKSPACES)"
        )
    if all(is_hidden(parts) for parts in below):  # the tools read nothing hidden below a root
        raise ContextError(
            "invalid context: workspace_root: a hidden folder (a name starting with '.'), "
            "whose files the workspace tools never read"
        )
    return workbench_graph(context)


def _reserved(key: str) -> bool:
    return key in _RESERVED or key.startswith(_RESERVED_PREFIXES)


def _agent(context: StudioContext, tools: list[BaseTool], policy: Policy) -> Graph:
    settings = Settings()
    setup_tracing(settings)
    model = chat_model(settings, model=context.model, base_url=context.base_url)
    graph = build_graph(model, tools, policy=policy)
    return graph.copy(update={"context_schema": type(context)})


__all__ = [
    "ContextError",
    "RefundContext",
    "StudioContext",
    "WorkbenchContext",
    "checkpointer",
    "drawn",
    "read_context",
    "refund_agent",
    "refund_graph",
    "workbench_agent",
    "workbench_graph",
]
