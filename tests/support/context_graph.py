"""A user's graph for ``langgraph dev``, built with ``context_schema``: its one tool reads the
run's context (``client.runs.wait(..., context=...)``) through ``ToolRuntime``."""

from __future__ import annotations

from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel

from gated_react import build_graph
from gated_react.testing import ScriptedChatModel, call


class UserContext(BaseModel):
    user_id: str


def whose(runtime: ToolRuntime[UserContext]) -> str:
    """Whose run this is."""
    return f"the run of {runtime.context.user_id}"


graph = build_graph(
    ScriptedChatModel(replies=[call("whose"), "done"], cycle=True),
    [whose],
    context_schema=UserContext,
    name="reads-context",
)
