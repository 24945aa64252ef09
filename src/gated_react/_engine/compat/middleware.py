"""LangChain middleware (``AgentMiddleware``) under the gate.

Model hooks run inside decide, around its one model call, composed as ``create_agent``
composes them (LangChain's own composers, first in the list outermost): ``before_model`` hooks,
then the ``wrap_model_call`` chain, then ``after_model`` hooks in reverse order. Whatever they
make of the reply is only a proposal: validate and the gate see it next, as they see the
model's own. Tool hooks (``wrap_tool_call``) run inside execute, only around a call the gate
let through, and may not change it.

What a hook may write: ``messages`` only, which here is the model's view of this one step (the
transcript without the system prompt, and after the model the reply): a ``before_model`` edit
changes what the model is shown, an ``after_model`` edit changes the reply the gate will check.
Neither writes the run's state. A declared ``jump_to: "end"`` ends the run with the AI message
the hook left as its answer, as ``create_agent`` ends one; every other key (the gate's and
execute's channels among them) and a ``Command`` end the run with
``middleware_error:<middleware>``, as does a hook that raises. A hook's
``request.system_message`` is the app's prompt, as under ``create_agent``; what the hooks make
of it follows the gate's fixed rules, which always open the system prompt.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain.agents.factory import (
    _chain_async_model_call_handlers,
    _chain_async_tool_call_wrappers,
    _chain_model_call_handlers,
    _chain_tool_call_wrappers,
)
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from gated_react._engine.authority.paying import METER, Called, Meter, Metered
from gated_react._engine.compat.call_limits import NAMES as LIMITS
from gated_react._engine.compat.middleware_admission import admitted
from gated_react._engine.compat.middleware_model import Ended, ModelCall, overrides
from gated_react._engine.compat.middleware_tools import ToolRun
from gated_react._engine.langgraph_internals import runtime_of
from gated_react.state import Call

if TYPE_CHECKING:  # the parts' type only: deps is built from the modules that use it
    from gated_react._engine.deps import NodeDeps


__all__ = ["Middleware"]

_AS_POLICY = frozenset({"HumanInTheLoopMiddleware", *LIMITS})
"""Taken as policy (``_engine/compat/reviews.py``, ``call_limits.py``), never run as hooks."""


def _metered(m: AgentMiddleware[Any, Any]) -> AgentMiddleware[Any, Any]:
    """A middleware that calls a model of its own (``SummarizationMiddleware``'s summarizer),
    as a copy whose model pays under the run's budgets (``paying.Metered``); others as given."""
    own = getattr(m, "_summary_model", None)
    if own is None or isinstance(own, Metered):
        return m
    made = copy.copy(m)
    made._summary_model = Metered(own)  # type: ignore[attr-defined]
    return made


def _having(stack: Sequence[AgentMiddleware[Any, Any]], hook: str) -> tuple[Any, ...]:
    return tuple(m for m in stack if overrides(m, hook) or overrides(m, f"a{hook}"))


@dataclass(frozen=True, slots=True)
class Middleware:
    """The middleware a graph was built with, sorted by the hooks each one has."""

    before: tuple[AgentMiddleware[Any, Any], ...]
    after: tuple[AgentMiddleware[Any, Any], ...]
    wraps: tuple[AgentMiddleware[Any, Any], ...]
    tool_wraps: tuple[AgentMiddleware[Any, Any], ...]
    tools: tuple[BaseTool, ...]
    """Tools the middleware registers: gated like every other tool."""

    @classmethod
    def of(cls, stack: Sequence[Any]) -> Middleware:
        """The middleware, each admitted (``middleware_admission``) or refused in one line."""
        checked = tuple(_metered(m) for m in admitted(stack) if type(m).__name__ not in _AS_POLICY)
        return cls(
            before=_having(checked, "before_model"),
            after=_having(checked, "after_model"),
            wraps=_having(checked, "wrap_model_call"),
            tool_wraps=_having(checked, "wrap_tool_call"),
            tools=tuple(t for m in checked for t in getattr(m, "tools", ()) or ()),
        )

    @property
    def on_model(self) -> bool:
        """Whether any hook sees the model call (its answer then never streams token by token:
        what streamed could differ from what the hooks made of it)."""
        return bool(self.before or self.after or self.wraps)

    def call_model(
        self,
        deps: NodeDeps,
        messages: list[BaseMessage],
        config: RunnableConfig,
        asked: Any,
        meter: Meter,
    ) -> Called:
        """Sync: the reply the hooks made, a message carrying what the model calls cost (each
        call the hooks make is checked and recorded by ``meter``), the messages they rewrote."""
        call = ModelCall(deps, messages, config, asked, meter)
        token = METER.set(meter)  # a hook's own model pays under the run's budgets
        try:
            return self._call_model(call)
        finally:
            METER.reset(token)

    def _call_model(self, call: ModelCall) -> Called:
        try:
            return self._hooked(call)
        except Ended as ended:
            call.view = ended.view
            return call.result()

    def _hooked(self, call: ModelCall) -> Called:
        for m in self.before:
            call.view = call.applied(m, "before_model", call.hook(m, "before_model")(*call.args()))
        request = call.request()
        if self.wraps:
            chain = _chain_model_call_handlers([call.layer(m) for m in self.wraps])
            assert chain is not None  # there are layers
            response = call.unblamed(lambda: chain(request, call.invoke).model_response)
        else:
            response = call.invoke(request)
        call.view = [*call.view, call.reply_in(response, self.wraps)]
        for m in reversed(self.after):
            call.view = call.applied(m, "after_model", call.hook(m, "after_model")(*call.args()))
        return call.result()

    async def acall_model(
        self,
        deps: NodeDeps,
        messages: list[BaseMessage],
        config: RunnableConfig,
        asked: Any,
        meter: Meter,
    ) -> Called:
        """Async twin of ``call_model``."""
        call = ModelCall(deps, messages, config, asked, meter)
        token = METER.set(meter)
        try:
            return await self._acall_model(call)
        finally:
            METER.reset(token)

    async def _acall_model(self, call: ModelCall) -> Called:
        try:
            return await self._ahooked(call)
        except Ended as ended:
            call.view = ended.view
            return call.result()

    async def _ahooked(self, call: ModelCall) -> Called:
        for m in self.before:
            update = await call.ahook(m, "before_model")(*call.args())
            call.view = call.applied(m, "before_model", update)
        request = call.request()
        if self.wraps:
            chain = _chain_async_model_call_handlers([call.alayer(m) for m in self.wraps])
            assert chain is not None
            response = await call.aunblamed(chain(request, call.ainvoke))
        else:
            response = await call.ainvoke(request)
        call.view = [*call.view, call.reply_in(response, self.wraps)]
        for m in reversed(self.after):
            update = await call.ahook(m, "after_model")(*call.args())
            call.view = call.applied(m, "after_model", update)
        return call.result()

    def call_tool(
        self, deps: NodeDeps, call: Call, config: RunnableConfig, run: Callable[[], Any]
    ) -> Any:
        """Sync: the value of a call the gate let through, run under the tool hooks."""
        tool_run = ToolRun(deps, call, config, runtime_of(config))
        chain = _chain_tool_call_wrappers([m.wrap_tool_call for m in self.tool_wraps])
        assert chain is not None  # called only with tool hooks
        try:
            result = chain(tool_run.request(), lambda req: tool_run.execute(req, run))
        except Exception as exc:
            raise tool_run.failure(exc) from None
        return tool_run.value(result)

    async def acall_tool(
        self, deps: NodeDeps, call: Call, config: RunnableConfig, run: Callable[[], Awaitable[Any]]
    ) -> Any:
        """Async twin of ``call_tool``."""
        tool_run = ToolRun(deps, call, config, runtime_of(config))
        chain = _chain_async_tool_call_wrappers([m.awrap_tool_call for m in self.tool_wraps])
        assert chain is not None

        async def execute(req: Any) -> Any:
            tool_run.check(req)
            refused = tool_run.refused_args()
            if refused is not None:
                return refused
            try:
                value = await run()
            except Exception as exc:
                tool_run.error = tool_run.error or exc
                raise
            return tool_run.executed(value)

        try:
            result = await chain(tool_run.request(), execute)
        except Exception as exc:
            raise tool_run.failure(exc) from None
        return tool_run.value(result)
