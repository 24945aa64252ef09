"""The parts a graph's nodes share: model, tools and policy, prepared once at build time."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_origin

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_langchain_tool
from langgraph.types import Command

from gated_react._engine.compat.call_limits import with_limits
from gated_react._engine.compat.reviews import Review, reviews_of, with_reviews
from gated_react._engine.conversation.prompt import app_section, rules
from gated_react._engine.execution.injection import Injector, Shown
from gated_react._engine.execution.tool_args import KEY_PARAM, accepts_key, build_schemas
from gated_react._engine.model.pricing import Pricer, pricer_for
from gated_react._engine.model.protocol import ActionProtocol, BoundModel
from gated_react._engine.observability.agent_spans import AgentSpans
from gated_react._engine.observability.span_content import Labels
from gated_react._engine.run_context import run_context
from gated_react.policy import Policy, UnpricedModel
from gated_react.redact import secrets_of
from gated_react.state import RunContext

if TYPE_CHECKING:
    from gated_react._engine.compat.middleware import Middleware
    from gated_react._engine.compat.structured import Structured


@dataclass(frozen=True, slots=True)
class NodeDeps:
    """Everything a node needs besides the state; built by ``build_graph``, never mutated."""

    model: BaseChatModel
    bound: BoundModel
    tools: Mapping[str, BaseTool]
    allowed: frozenset[str]
    keyed: frozenset[str]
    direct: frozenset[str]
    """The tools whose result ends the run (``return_direct=True``), as under create_agent."""
    policy: Policy
    protocol: ActionProtocol
    system: str
    """The system prompt every request opens with: ``rules``, then the app's prompt."""
    rules: str
    """The gate's fixed part of ``system``, which no middleware replaces."""
    pricer: Pricer
    """How the model's calls are priced (the policy's price, else genai-prices' table)."""
    context: RunContext
    """What every run of this graph records it ran under (``State.run_context``)."""
    answer_streams: bool = False
    """Whether a final answer streams token by token (native tool calling, no
    ``answer_schema``); see ``_engine/conversation/streaming.py``."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """The model's keys: masked in every message a failed call leaves in the state."""
    spans: AgentSpans = field(default_factory=lambda: AgentSpans(Labels()))
    """The graph's OpenTelemetry spans: what they say about its agent and model, and each
    invocation's span (the graph carries it as a callback handler)."""
    middleware: Middleware | None = None
    """LangChain middleware run under the gate (``_engine/compat/middleware.py``); None without any,
    so a graph without middleware runs exactly the code it ran before."""
    injector: Injector | None = None
    """The tools that take injected arguments (``ToolRuntime``, ``InjectedState``, ...) and
    how to fill them; None when no tool does."""
    structured: Structured | None = None
    """How the answer is asked for and read under a ``response_format`` (native tool calling;
    the JSON and text protocols use ``Policy.answer_schema``)."""
    reviews: Mapping[str, Review] = field(default_factory=dict)
    """How calls under approval are described and when they are asked about
    (``HumanInTheLoopMiddleware``'s configuration, ``_engine/compat/reviews.py``)."""
    app_prompt: str | None = None
    """The application's prompt (``build_graph(system_prompt=)``): what model hooks see as
    ``request.system_message`` and may replace."""

    @property
    def shown(self) -> Shown:
        """What a tool is shown of the agent (``ToolRuntime.tools``, a masking writer)."""
        visible = tuple(tool for name, tool in self.tools.items() if name in self.allowed)
        return Shown(visible, self.secrets)

    @classmethod
    def build(
        cls,
        model: BaseChatModel,
        tools: Sequence[BaseTool | Callable[..., Any]],
        policy: Policy,
        middleware: Sequence[Any] = (),
        instructions: str | None = None,
        *,
        protocol: ActionProtocol,
        capture: bool = False,
        response_format: Any = None,
    ) -> NodeDeps:
        """``instructions``: the application's system prompt, after the fixed rules;
        ``protocol``: how the model states its action (``build_graph`` picks it by
        ``policy.protocol`` from ``protocols.PROTOCOLS``); ``capture``: whether spans may
        carry content (``build_graph`` reads the opt-in from the environment)."""
        hooks = _middleware(middleware)
        reviews = reviews_of(middleware)
        # the limits first: they read which budget fields the app set itself
        policy = with_reviews(with_limits(policy, middleware), reviews)
        registry = _registry(tools)
        if hooks is not None:  # the middleware's own tools: gated like any other
            registry = _registry([*registry.values(), *hooks.tools])
        policy.check_tools(registry)
        allowed = policy.allowed(frozenset(registry))
        visible = [tool for name, tool in registry.items() if name in allowed]
        pricer = pricer_for(model, policy.prices)
        if policy.budget.max_cost is not None and pricer.unpriced:
            limit = policy.budget.max_cost
            why = f"max_cost {limit:g} needs a price: {pricer.unpriced} (give one in Policy.prices)"
            raise UnpricedModel(why)
        secrets, context = secrets_of(model), run_context(model, policy, pricer)
        build_schemas(registry.values())
        calls = policy.max_parallel_calls
        structured = _structured(response_format, model, visible)
        fixed = rules(protocol.instructions(visible, calls), policy.answer_schema, calls)
        return cls(
            model=model,
            bound=_bound(protocol, model, visible, policy, structured),
            tools=registry,
            allowed=allowed,
            keyed=frozenset(name for name, tool in registry.items() if accepts_key(tool)),
            direct=frozenset(name for name, tool in registry.items() if tool.return_direct),
            policy=policy,
            protocol=protocol,
            system=fixed + app_section(instructions, fixed),
            rules=fixed,
            app_prompt=instructions if instructions and instructions.strip() else None,
            pricer=pricer,
            answer_streams=protocol.answer_is_text
            and policy.answer_schema is None
            and structured is None
            and not (hooks and hooks.on_model),
            structured=structured,
            context=context,
            secrets=secrets,
            spans=AgentSpans(Labels.of(model, secrets, context, capture)),
            middleware=hooks,
            injector=Injector.of(registry, KEY_PARAM, Shown(tuple(visible), secrets)),
            reviews=reviews,
        )

    def idempotent(self, tool: str) -> bool:
        """Whether a tool declared itself safe to run twice (``metadata={"idempotent": True}``)."""
        found = self.tools.get(tool)
        return bool(found is not None and (found.metadata or {}).get("idempotent") is True)


def _structured(
    response_format: Any, model: BaseChatModel, visible: Sequence[BaseTool]
) -> Structured | None:
    """How a ``response_format`` is asked for (LangChain's strategies: the ``langchain`` extra,
    imported only then)."""
    if response_format is None:
        return None
    from gated_react._engine.compat.structured import structured_of

    return structured_of(response_format, model, visible)


def _bound(
    protocol: ActionProtocol,
    model: BaseChatModel,
    visible: Sequence[BaseTool],
    policy: Policy,
    structured: Structured | None,
) -> BoundModel:
    """The model as every decision calls it: the protocol's binding, or, under a
    ``response_format``, the tools with its output tools or its provider setting."""
    if structured is None:
        return protocol.bind(model, visible, policy)
    try:
        return model.bind_tools([*visible, *structured.tools], **structured.bind_kwargs(model))
    except NotImplementedError:  # LangChain's fake chat models bind nothing
        return model


def _middleware(middleware: Sequence[Any]) -> Middleware | None:
    """The middleware, admitted; LangChain (the ``langchain`` extra) is imported only then."""
    if isinstance(middleware, Sequence) and not isinstance(middleware, str) and not middleware:
        return None
    from gated_react._engine.compat.middleware import Middleware

    return Middleware.of(middleware)


def _registry(tools: Sequence[BaseTool | Callable[..., Any]]) -> dict[str, BaseTool]:
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        # A lone tool is iterable (a pydantic model yields its fields): say what was meant.
        raise TypeError(f"expected a list of tools, got {type(tools).__name__}")
    registry: dict[str, BaseTool] = {}
    for given in tools:
        tool = _tool(given)
        if _returns_command(tool):
            raise TypeError(
                f"tool {tool.name} returns a Command (a state update); gated-react's state is "
                "written by its nodes only: return the data instead"
            )
        if tool.name in registry:
            raise ValueError(f"two tools are named {tool.name!r}; tool names must be unique")
        registry[tool.name] = tool
    return registry


def _returns_command(tool: BaseTool) -> bool:
    """Whether the tool's function says it returns a ``Command`` (refused at build, not at its
    first call; one that returns one unannounced is refused when it does)."""
    for func in (getattr(tool, "func", None), getattr(tool, "coroutine", None)):
        try:
            returns = inspect.signature(func).return_annotation if func else None
        except (TypeError, ValueError):
            continue
        if isinstance(returns, str):
            if returns.split("[", 1)[0].rsplit(".", 1)[-1] == "Command":
                return True
        elif returns is Command or get_origin(returns) is Command:
            return True
    return False


def _tool(given: BaseTool | Callable[..., Any]) -> BaseTool:
    """A LangChain tool; a plain function becomes one as ``create_agent`` makes it (``@tool``:
    its name, docstring and type hints)."""
    if isinstance(given, BaseTool):
        return given
    if callable(given) and not isinstance(given, type):
        try:
            return as_langchain_tool(given)
        except ValueError as exc:  # no docstring, or one @tool cannot read
            name = getattr(given, "__name__", type(given).__name__)
            raise TypeError(f"function {name} cannot be a tool: {exc}") from None
    raise TypeError(
        "tools must be LangChain tools (@tool functions or BaseTool) or plain functions, "
        f"got {type(given).__name__}"
    )
