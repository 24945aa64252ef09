"""One decision's model call under LangChain's model hooks: what ``Middleware.call_model`` and
its async twin share (``_engine/compat/middleware.py`` says what a hook may do)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.messages.ai import add_usage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph.message import add_messages

from gated_react._engine.authority.paying import Called, Meter
from gated_react._engine.conversation.prompt import app_section
from gated_react._engine.execution.injection import shown_state
from gated_react._engine.langgraph_internals import graph_state, runtime_of
from gated_react._engine.model.protocol import BoundModel
from gated_react.errors import GatedReactError, MiddlewareFailed

if TYPE_CHECKING:  # the parts' type only: deps is built from the modules that use it
    from gated_react._engine.deps import NodeDeps

Handler = Callable[..., Any]


def overrides(m: AgentMiddleware[Any, Any], hook: str) -> bool:
    """Whether ``m`` has its own ``hook`` (not the base class's)."""
    return getattr(type(m), hook) is not getattr(AgentMiddleware, hook)


_ENDING = (
    "to end it, give an AI message without tool calls as the reply, from after_model or "
    "wrap_model_call, or last in the messages with jump_to 'end': it is the final answer"
)


def _jumps(m: AgentMiddleware[Any, Any], hook: str) -> tuple[str, ...]:
    """Where ``m``'s hook may jump (``@hook_config(can_jump_to=...)``), read as
    ``create_agent`` reads it: the sync hook's, else the async one's."""
    for name in (hook, f"a{hook}"):
        jumps = getattr(getattr(type(m), name, None), "__can_jump_to__", None)
        if overrides(m, name) and jumps is not None:
            return tuple(jumps)
    return ()


class Ended(GatedReactError):  # control flow inside call_model, never raised out of it
    """A hook ended the run as ``create_agent`` ends one (``jump_to: "end"``): no other hook
    and no (further) model call runs; the AI message it left is the answer the gate checks."""

    def __init__(self, view: list[Any]) -> None:
        super().__init__("jump_to end")
        self.view = view


class ModelCall:
    """One decision's model call under the hooks: what the sync and async bodies share."""

    def __init__(
        self,
        deps: NodeDeps,
        messages: list[BaseMessage],
        config: RunnableConfig,
        asked: Any,
        meter: Meter,
    ) -> None:
        self.deps, self.asked, self.runtime, self.meter = deps, asked, runtime_of(config), meter
        # What follows the app's prompt in the system message (the conversation's own system
        # messages, which the transcript appends): kept whatever a hook makes of the prompt.
        head = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
        self.given = head.text.removeprefix(deps.system) if head is not None else ""
        rest = messages[1:] if head is not None else messages
        self.view: list[Any] = _merged([], rest)  # with ids, so hooks can replace
        self.shown = {m.id: m.content for m in self.view if m.id}
        """What each message the model is shown held before the hooks, by id."""
        self.replies: list[BaseMessage] = []
        """Every reply the model gave: all of them are paid for, whatever a hook kept."""
        self.raised: list[BaseException] = []
        """What the model raised: that is the model's failure (``llm_*``), not a hook's."""
        self.blamed: list[tuple[BaseException, str]] = []
        state = shown_state(graph_state(config))
        self.state: dict[str, Any] = state if isinstance(state, dict) else {}
        """The state as ``create_agent``'s hooks see it (the app's fields, the run's end),
        its messages the view: read once, as a hook's update may change only the messages."""

    def state_now(self) -> dict[str, Any]:
        return {**self.state, "messages": list(self.view)}

    def args(self) -> tuple[dict[str, Any], Any]:
        return self.state_now(), self.runtime

    def hook(self, m: AgentMiddleware[Any, Any], name: str) -> Handler:
        if not overrides(m, name):
            why = f"has only an async {name}: run the graph with ainvoke or astream"
            raise MiddlewareFailed(m.name, why)
        return self.guarded(m, name, getattr(m, name))

    def ahook(self, m: AgentMiddleware[Any, Any], name: str) -> Handler:
        if not overrides(m, f"a{name}"):
            sync = self.guarded(m, name, getattr(m, name))

            async def inline(*args: Any) -> Any:
                return sync(*args)

            return inline
        asynchronous = getattr(m, f"a{name}")

        async def guarded(*args: Any) -> Any:
            try:
                return await asynchronous(*args)
            except Exception as exc:
                raise MiddlewareFailed.of(m.name, name, exc, self.deps.secrets) from exc

        return guarded

    def guarded(self, m: AgentMiddleware[Any, Any], name: str, func: Handler) -> Handler:
        def run(*args: Any) -> Any:
            try:
                return func(*args)
            except Exception as exc:
                raise MiddlewareFailed.of(m.name, name, exc, self.deps.secrets) from exc

        return run

    def applied(self, m: AgentMiddleware[Any, Any], hook: str, update: Any) -> list[Any]:
        """The view after a hook's update; anything but ``messages`` ends the run."""
        if update is None:
            return self.view
        where = f"{hook} returned"
        if not isinstance(update, dict):
            why = f"{where} a {type(update).__name__}; only the node that owns a channel writes it"
            raise MiddlewareFailed(m.name, why)
        # a jump the hook does not declare (can_jump_to) is no jump: create_agent has no edge
        # for it, and goes on as if none was asked
        jump = update.get("jump_to") if update.get("jump_to") in _jumps(m, hook) else None
        if jump and jump != "end":
            why = f"{where} jump_to {jump!r}; only the gate routes a run ({_ENDING})"
            raise MiddlewareFailed(m.name, why)
        others = sorted(set(update) - {"messages", "jump_to"})
        if others:
            why = f"{where} {others}; a hook may change only the messages the model is shown"
            raise MiddlewareFailed(m.name, why)
        view = _merged(self.view, update.get("messages") or [])
        if jump:  # create_agent's way to end a run: the AI message the hook left is its answer
            if not (view and isinstance(view[-1], AIMessage) and not view[-1].tool_calls):
                why = f"{where} jump_to 'end' with no answer last in the messages ({_ENDING})"
                raise MiddlewareFailed(m.name, why)
            raise Ended(view)
        if hook == "after_model" and not (view and isinstance(view[-1], AIMessage)):
            # the reply is the view's last message; an earlier one is a past step's
            raise MiddlewareFailed(m.name, "after_model left no AI reply last in the messages")
        return view

    def request(self) -> Any:
        deps = self.deps
        visible: list[BaseTool | dict[str, Any]] = [
            t for name, t in deps.tools.items() if name in deps.allowed
        ]
        state: Any = self.state_now()
        view = list(self.view)
        app = SystemMessage(deps.app_prompt) if deps.app_prompt is not None else None
        return ModelRequest(
            model=deps.model,
            messages=view,
            system_message=app,
            tools=visible,
            state=state,
            runtime=self.runtime,
        )

    def layer(self, m: AgentMiddleware[Any, Any]) -> Handler:
        def wrapped(request: Any, handler: Handler) -> Any:
            try:
                return self.checked(m, m.wrap_model_call(request, handler))
            except Exception as exc:
                self.blame(exc, m.name)
                raise

        return wrapped

    def alayer(self, m: AgentMiddleware[Any, Any]) -> Handler:
        async def wrapped(request: Any, handler: Handler) -> Any:
            try:
                return self.checked(m, await m.awrap_model_call(request, handler))
            except Exception as exc:
                self.blame(exc, m.name)
                raise

        return wrapped

    def blame(self, exc: BaseException, name: str) -> None:
        """The innermost layer an error passed through that did not come from the model: the
        middleware that raised it (the outer ones only let it through)."""
        known = isinstance(exc, MiddlewareFailed) or any(exc is e for e in self.raised)
        if not known and not any(exc is e for e, _ in self.blamed):
            self.blamed.append((exc, name))

    def unblamed(self, run: Callable[[], Any]) -> Any:
        try:
            return run()
        except Exception as exc:
            raise self.failure(exc) from exc

    async def aunblamed(self, running: Awaitable[Any]) -> Any:
        try:
            return (await running).model_response
        except Exception as exc:
            raise self.failure(exc) from exc

    def failure(self, exc: Exception) -> Exception:
        """A model's own error as it is (classified like any model failure); a hook's, named."""
        name = next((n for e, n in self.blamed if e is exc), None)
        if name is None:
            return exc
        return MiddlewareFailed.of(name, "wrap_model_call", exc, self.deps.secrets)

    def checked(self, m: AgentMiddleware[Any, Any], result: Any) -> Any:
        if getattr(result, "command", None) is not None:
            why = "wrap_model_call returned a Command; only the node that owns a channel writes it"
            raise MiddlewareFailed(m.name, why)
        return result

    def bound(self, request: Any) -> BoundModel:
        """The graph's bound model, or the request's model and tools bound the same way."""
        deps, tools = self.deps, list(request.tools)
        if any(not isinstance(t, BaseTool) for t in tools):
            # Raised as the model call's error, so the layer that asked for it is named.
            raise ValueError("a provider-side tool would run where the gate cannot see it")
        visible = [name for name in deps.tools if name in deps.allowed]
        same = request.model is deps.model and [t.name for t in tools] == visible
        settings = dict(request.model_settings)
        if request.tool_choice is not None:
            settings["tool_choice"] = request.tool_choice
        if same and not settings:
            return deps.bound
        bound = deps.protocol.bind(request.model, tools, deps.policy)
        return bound.bind(**settings) if settings else bound

    def sent(self, request: Any) -> list[BaseMessage]:
        """The request as the model gets it: the gate's rules first, whatever the hooks made
        of the app's prompt after them (they cannot remove the rules), then the rest."""
        app = request.system_message
        shown = app_section(None if app is None else _text(app), self.deps.rules) + self.given
        system = self.deps.rules + shown
        return [SystemMessage(system), *request.messages] if system else list(request.messages)

    def invoke(self, request: Any) -> Any:
        """One model call a hook asked for: checked against the budgets and recorded, so a
        hook that calls the model again pays again."""
        bound, sent = self.bound(request), self.sent(request)
        try:
            reply = self.meter.call(lambda: bound.invoke(sent, self.asked), sent)
        except Exception as exc:
            self.raised.append(exc)
            raise
        return self.response(reply)

    async def ainvoke(self, request: Any) -> Any:
        bound, sent = self.bound(request), self.sent(request)
        try:
            reply = await self.meter.acall(lambda: bound.ainvoke(sent, self.asked), sent)
        except Exception as exc:
            self.raised.append(exc)
            raise
        return self.response(reply)

    def response(self, reply: BaseMessage) -> Any:
        self.replies.append(reply)
        return ModelResponse(result=[reply])

    def reply_in(self, response: Any, outer: Sequence[AgentMiddleware[Any, Any]]) -> AIMessage:
        found = [m for m in response.result if isinstance(m, AIMessage)]
        if not found:
            name = outer[0].name if outer else "wrap_model_call"
            raise MiddlewareFailed(name, "wrap_model_call returned no AI message")
        return found[-1]

    def result(self) -> Called:
        """The reply after the hooks, the message whose usage the spans show, and the messages
        a hook rewrote (``before_model``: what ``create_agent`` stores of them)."""
        reply = self.view[-1]  # an AI message: applied() holds the hooks to that
        rewritten = {
            m.id: (self.shown[m.id], m)
            for m in self.view[:-1]
            if m.id in self.shown and m.content != self.shown[m.id]
        }
        return Called(reply, paid(self.replies, reply), rewritten)


def _text(message: SystemMessage) -> str:
    """A system message's text, its text blocks one per line (as a provider shows them)."""
    if isinstance(message.content, str):
        return message.content
    return "\n".join(block["text"] for block in message.content_blocks if block["type"] == "text")


def _merged(view: list[Any], update: Any) -> list[Any]:
    """``view`` with a hook's messages applied as the ``messages`` channel applies them."""
    return cast(list[Any], add_messages(view, update))


def paid(replies: list[BaseMessage], reply: AIMessage) -> BaseMessage:
    """A message carrying what the model's replies cost together: the one reply itself; none
    (a hook answered from a cache) costs nothing; several add up, and one without token
    counts leaves them all unpriced, as that reply alone would."""
    if len(replies) == 1:
        return replies[0]
    usages = [getattr(r, "usage_metadata", None) for r in replies]
    if not replies:
        usages = [{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}]
    if any(not u for u in usages):
        return AIMessage(content=reply.content)
    total = usages[0]
    for more in usages[1:]:
        total = add_usage(total, more)
    return AIMessage(content=reply.content, usage_metadata=total)
