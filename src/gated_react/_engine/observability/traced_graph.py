"""The compiled graph, whose runs carry its spans handler (``AgentSpans``) only while an
OpenTelemetry SDK can record.

With the API alone installed the handler would skip every event, but LangChain's callback
managers would still carry it through every node, model and tool call of a step: about 100 K
instructions a step (0.8%). The handler is added when a run starts instead (``stream`` and
``astream``, which ``invoke``, ``ainvoke``, ``batch``, ``astream_events`` and the server's
runs go through), so an SDK installed after the graph was built records from its next run on.

The graph names its input's messages too (``NamedInputs``, ``state/input_ids.py``: a replay of
the input checkpoint is then the same run).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Self, cast

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from gated_react._engine.observability.agent_spans import AgentSpans, api_alone
from gated_react.state.input_ids import NamedInputs, graph_attrs


class TracedGraph(NamedInputs):
    """A compiled graph whose runs carry ``spans`` while an SDK can record. LangGraph's
    ``copy`` (``with_config`` makes one) passes ``spans`` on with every other attribute."""

    def __init__(self, *, spans: AgentSpans | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spans = spans

    @classmethod
    def of(cls, graph: CompiledStateGraph[Any, Any, Any, Any], spans: AgentSpans) -> Self:
        """``graph`` (as ``compile`` made it) as a traced graph, as LangGraph copies one."""
        return cls(spans=spans, **graph_attrs(graph))

    def stream(  # LangGraph's keywords pass through unchanged
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        return super().stream(input, self._traced(config), **kwargs)

    def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        return super().astream(input, self._traced(config), **kwargs)

    def _traced(self, config: RunnableConfig | None) -> RunnableConfig | None:
        """``config`` with the handler among its callbacks where the graph's own config would
        have put it: before an app's list, after a parent run's manager's handlers."""
        if self.spans is None or api_alone():
            return config
        found = (config or {}).get("callbacks")
        if isinstance(found, BaseCallbackManager):
            callbacks: Any = found.copy()
            callbacks.add_handler(self.spans, inherit=True)
        else:
            callbacks = [self.spans, *(found or ())]
        return cast(RunnableConfig, {**(config or {}), "callbacks": callbacks})
