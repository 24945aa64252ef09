"""A gated-react agent as a LangChain tool, so another agent (gated or not) can delegate to it.

The inner agent runs as a run of its own: a fresh thread, none of the caller's graph internals,
only its callbacks (so traces nest). Its end, success or stop, comes back as the tool's result;
a stopped inner run is data for the caller, never an exception.

``as_tool`` needs only ``langchain-core``. LangChain's own agents (``create_agent``) live in the
``langchain`` package, which gated-react leaves to the ``langchain`` extra; ``create_agent`` here
imports it on call, so a missing package is one line naming the extra.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from gated_react.errors import GatedReactError
from gated_react.runs import Graph, aresult_of, result_of
from gated_react.state import SUMMARY_KEYS

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
LANGCHAIN_EXTRA = (
    "create_agent needs LangChain's `langchain` package, which gated-react does not install by "
    "default: pip install 'gated-react[langchain]'"
)


class LangChainMissing(GatedReactError, ImportError):
    """The ``langchain`` package (the ``langchain`` extra) is not installed."""


class AgentTask(BaseModel):
    """What the calling agent sends."""

    goal: str = Field(min_length=1, max_length=4000, description="The task, in plain words")


class AgentTool(BaseTool):
    """Runs a compiled gated-react graph for one goal and returns how it ended."""

    graph: Any
    args_schema: type[BaseModel] = AgentTask

    def _run(
        self, goal: str, run_manager: CallbackManagerForToolRun | None = None, **_: Any
    ) -> dict[str, Any]:
        config = _own_run(run_manager.get_child() if run_manager else None)
        return outcome(result_of(self.graph, self.graph.invoke({"goal": goal}, config), config))

    async def _arun(
        self, goal: str, run_manager: AsyncCallbackManagerForToolRun | None = None, **_: Any
    ) -> dict[str, Any]:
        config = _own_run(run_manager.get_child() if run_manager else None)
        output = await self.graph.ainvoke({"goal": goal}, config)
        return outcome(await aresult_of(self.graph, output, config))


def as_tool(graph: Graph, name: str, description: str, *, idempotent: bool = False) -> BaseTool:
    """``graph`` (from ``build_graph``) as a tool taking ``{"goal": str}``.

    The result is ``{"status", "stop_reason", "message", "answer"}``; a run that pauses for a
    human approval comes back with ``status="paused"`` and the question under ``pending``
    (a tool call cannot answer it: put the tool itself under the caller's ``require_approval``).
    Mark the tool ``idempotent`` only when the inner agent's tools are all safe to repeat.
    """
    if not _NAME.fullmatch(name):
        raise ValueError(f"tool name {name[:80]!r} must be 1-64 letters, digits, '_' or '-'")
    if not description.strip():
        raise ValueError("a tool needs a description: the calling model chooses tools by it")
    return AgentTool(
        graph=graph,
        name=name,
        description=description.strip(),
        metadata={"idempotent": idempotent},
    )


def create_agent(
    model: str | BaseChatModel,
    tools: Sequence[BaseTool | Callable[..., Any] | dict[str, Any]] | None = None,
    **options: Any,
) -> Any:
    """LangChain's ``langchain.agents.create_agent``, unchanged: an ordinary LangChain agent,
    for example one calling ``as_tool`` agents. Raises ``LangChainMissing`` without the extra."""
    try:
        from langchain.agents import create_agent as langchain_create_agent
    except ImportError:
        raise LangChainMissing(LANGCHAIN_EXTRA) from None
    return langchain_create_agent(model, tools, **options)


def outcome(result: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a run's result (``runs.result_of``'s) the calling agent needs."""
    pending = list(result.get("pending") or ())
    if pending:
        return {
            "status": "paused",
            "stop_reason": None,
            "message": "the agent waits for a human decision, which a tool call cannot give",
            "answer": None,
            "pending": pending,
        }
    return {key: result.get(key) for key in SUMMARY_KEYS}


def _own_run(callbacks: Any) -> RunnableConfig:
    """A config that makes the inner graph a run of its own: replacing ``configurable`` drops the
    caller's task, checkpointer and stream hooks, which would otherwise make it a subgraph."""
    return {"callbacks": callbacks, "configurable": {"thread_id": uuid.uuid4().hex}}
