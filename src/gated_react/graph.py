"""The gated ReAct graph, assembled in one straight line.

START -> decide -> validate -> gate -> execute -> observe -> decide ...
validate -> finish (final answer) | decide (retry) ; every other end -> stop

Clients read the public channels (``state.PUBLIC``): they are what streams, what ``get_state``
shows and what ``invoke`` returns. A step writes them twice (the model's calls, their results;
the calls once more after a human approved them) and a run's end once, as ``create_agent``
does, so a loop that prints each ``values`` event's last message prints what it prints there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Never, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.typing import ContextT

from gated_react import routing
from gated_react._engine.compat.create_agent_args import refuse as refuse_args
from gated_react._engine.deps import NodeDeps
from gated_react._engine.langgraph_internals import fuse_routes, node, route
from gated_react._engine.observability.traced_graph import TracedGraph
from gated_react.models import NoModel, init_model
from gated_react.nodes.decide import DecideChannels, adecide, decide
from gated_react.nodes.execute import ExecuteChannels, aexecute, execute
from gated_react.nodes.finish import FinishChannels, afinish, finish
from gated_react.nodes.gate import GateChannels, agate, gate
from gated_react.nodes.observe import ObserveChannels, observe
from gated_react.nodes.stop import StopChannels, astop, stop
from gated_react.nodes.validate import ValidateChannels, validate
from gated_react.policy import Policy, response_schema, with_response_format
from gated_react.protocols import PROTOCOLS
from gated_react.settings import capture_content
from gated_react.state import RunInput, RunInputDict, RunResult, State
from gated_react.state.revived import reviver
from gated_react.state.schemas import Schemas, app_fields

if TYPE_CHECKING:  # the langchain extra's; a response format without them is a pydantic model
    from langchain.agents.middleware import AgentMiddleware
    from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
    from pydantic import BaseModel

GatedGraph = CompiledStateGraph[State, ContextT, RunInput | RunInputDict, RunResult]
"""What ``build_graph`` returns; its input is typed so ``graph.invoke({"goal": ...})`` checks,
and its context (``ContextT``: ``build_graph(context_schema=)``'s type, else None) so
``graph.invoke(..., context=Context(...))`` does."""

# Supersteps one ReAct step can take (decide, validate, gate, execute, observe).
_NODES_PER_STEP = 5


def build_graph(
    model: BaseChatModel | str,
    tools: Sequence[BaseTool | Callable[..., Any]] | None = None,
    *,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[AgentMiddleware[Any, Any]] = (),
    response_format: type[BaseModel] | ToolStrategy[Any] | ProviderStrategy[Any] | None = None,
    context_schema: type[ContextT] | None = None,
    state_schema: type[Any] | None = None,
    policy: Policy | None = None,
    checkpointer: BaseCheckpointSaver[str] | None = None,
    store: BaseStore | None = None,
    name: str | None = None,
    **create_agent_only: Never,
) -> GatedGraph[ContextT]:
    """A compiled graph in which ``model`` proposes and ``policy`` decides what runs.

    The rest is ``create_agent``'s, with its meaning: ``model`` may be a ``"provider:model"``
    string; ``tools`` may be plain functions (None, the default, is no tools: a graph that
    only answers); ``system_prompt`` is the agent's instructions
    (after the gate's fixed rules); ``response_format`` a pydantic model the answer must fit
    (``Policy.answer_schema``), its data in the result's ``structured_response``;
    ``context_schema`` types ``invoke(..., context=...)``, which tools read as
    ``ToolRuntime.context``; ``state_schema`` (an ``AgentState`` subclass) adds the app's own
    fields to the state: passed with the input, read by tools (``ToolRuntime.state``),
    returned; ``store`` is given to tools (``ToolRuntime.store``, ``InjectedStore``);
    ``name`` names the graph.

    ``middleware`` runs LangChain's ``AgentMiddleware`` under the gate: model hooks around
    decide's model call, tool hooks around the calls the gate let through. One whose job the
    gate does, or that would get past it, is refused (``MiddlewareRefused``, naming the
    equivalent); see the create_agent guide.

    Without a checkpointer the graph has none (LangGraph Studio and the server bring their own).
    ``create_agent``'s other arguments (``interrupt_before``, ...) are refused
    with ``ArgumentRefused``, naming what does their job here.
    """
    refuse_args(create_agent_only)
    policy = policy or Policy()
    native = response_format is not None and policy.protocol == "tools" and _has_langchain()
    if response_format is not None and not native:
        policy = with_response_format(policy, response_format)
    elif response_format is not None:
        response_schema(policy, response_format)  # one answer schema, not two
    deps = NodeDeps.build(
        init_model(model),
        () if tools is None else tools,
        policy,
        middleware,
        _text(system_prompt),
        protocol=PROTOCOLS[policy.protocol],
        capture=capture_content(),
        response_format=response_format if native else None,
    )
    answer = deps.structured.schema if deps.structured else deps.policy.answer_schema
    schemas = Schemas(app_fields(state_schema), reviver(answer) if answer is not None else None)
    graph = StateGraph(
        schemas.state, context_schema, input_schema=schemas.input, output_schema=schemas.output
    )
    graph.add_node("decide", node(decide, adecide, deps=deps), input_schema=DecideChannels)
    graph.add_node("validate", node(validate, deps=deps), input_schema=ValidateChannels)
    graph.add_node("gate", node(gate, agate, deps=deps), input_schema=GateChannels)
    graph.add_node("execute", node(execute, aexecute, deps=deps), input_schema=ExecuteChannels)
    graph.add_node("observe", node(observe, deps=deps), input_schema=ObserveChannels)
    graph.add_node("finish", node(finish, afinish), input_schema=FinishChannels)
    graph.add_node("stop", node(stop, astop), input_schema=StopChannels)
    graph.add_edge(START, "decide")
    graph.add_conditional_edges("decide", route(routing.after_decide), routing.AFTER_DECIDE)
    graph.add_conditional_edges("validate", route(routing.after_validate), routing.AFTER_VALIDATE)
    graph.add_conditional_edges("gate", route(routing.after_gate), routing.AFTER_GATE)
    graph.add_edge("execute", "observe")
    graph.add_conditional_edges("observe", route(routing.after_observe), routing.AFTER_OBSERVE)
    graph.add_edge("finish", END)
    graph.add_edge("stop", END)
    compiled = graph.compile(checkpointer=checkpointer, store=store, name=name or "gated-react")
    fuse_routes(compiled)  # each router reads the step in its node's writer
    compiled.stream_channels = schemas.public
    # A budget a human may extend can outgrow any limit set now: LangGraph's own default then.
    config = RunnableConfig()
    if policy.on_budget == "stop":
        config["recursion_limit"] = _NODES_PER_STEP * policy.budget.max_steps + 5
    configured = TracedGraph.of(compiled, deps.spans).with_config(config)
    return cast(GatedGraph[ContextT], configured)


def idle_graph(
    checkpointer: BaseCheckpointSaver[str] | None = None,
) -> GatedGraph:
    """The same nodes and edges with no tools and a model that is never called: for drawing
    the graph and reading stored runs, which never run a node."""
    return build_graph(NoModel(), [], checkpointer=checkpointer)


def _has_langchain() -> bool:
    """Whether LangChain's agents (the ``langchain`` extra) are installed: its structured output
    strategies are then used as ``create_agent`` uses them."""
    try:
        import langchain.agents.structured_output  # noqa: F401
    except ImportError:
        return False
    return True


def _text(prompt: str | SystemMessage | None) -> str | None:
    """The application's prompt as text (a ``SystemMessage``'s text blocks joined)."""
    if isinstance(prompt, SystemMessage):
        return prompt.text
    if prompt is not None and not isinstance(prompt, str):
        raise TypeError(
            f"system_prompt must be a str or SystemMessage, got {type(prompt).__name__}"
        )
    return prompt
