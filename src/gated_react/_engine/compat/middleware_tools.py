"""One tool call under LangChain's ``wrap_tool_call`` hooks, after the gate let it through.


The hooks see the call as ``ToolNode`` would give it (a ``ToolCallRequest``: the call, the
tool, a ``ToolRuntime``) and may run it, retry it, or answer in its place. They may not change
it: a request whose tool or arguments differ from what the gate let through never runs
(``tool_denied``), and a tool that is not idempotent runs at most once however often a hook
asks. An error ``ToolMessage`` is a failed call (``Policy.on_tool_error`` decides what follows).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime

from gated_react._engine.execution.injection import tool_runtime
from gated_react._engine.execution.tool_args import invocation_error
from gated_react._engine.execution.tool_results import is_blocks
from gated_react._engine.execution.tool_runner import CallChanged, RunAgain
from gated_react.errors import GatedReactError
from gated_react.state import Call

if TYPE_CHECKING:  # the parts' type only: deps is built from the modules that use it
    from gated_react._engine.deps import NodeDeps


class ToolMiddlewareError(GatedReactError):
    """A tool hook answered with something that is not a ``ToolMessage``."""


class ToolRun:
    """What the sync and async tool chains share: the request, the checks, the value."""

    def __init__(
        self, deps: NodeDeps, call: Call, config: RunnableConfig, runtime: Runtime[Any]
    ) -> None:
        self.deps, self.call, self.config, self.runtime = deps, call, config, runtime
        self.runs, self.again = 0, False
        self.ran: tuple[ToolMessage, Any] | None = None
        self.changed: CallChanged | None = None
        self.error: Exception | None = None
        """The tool's first error: what a call it could not be retried for failed of."""

    def request(self) -> ToolCallRequest:
        call = self.call
        tool_call = ToolCall(name=call.tool, args=call.frozen(), id=call.id, type="tool_call")
        injector = self.deps.injector
        node = injector.node if injector else None
        runtime = tool_runtime(node, tool_call, self.config, self.deps.shown)
        state: dict[str, Any] = runtime.state
        tool = self.deps.tools[call.tool]
        return ToolCallRequest(tool_call=tool_call, tool=tool, state=state, runtime=runtime)

    def check(self, request: Any) -> None:
        """The call the hooks pass on is the gate's, and runs again only if it is idempotent."""
        call, asked = self.call, getattr(request, "tool_call", None) or {}
        tool = getattr(request, "tool", None)
        same = asked.get("name") == call.tool and asked.get("args") == call.args
        if not same or tool is not self.deps.tools[call.tool]:
            changed = f"{asked.get('name')}({json.dumps(asked.get('args'), default=str)})"
            self.changed = CallChanged(
                f"a tool hook changed the call the gate let through into {changed[:200]}; "
                "change the model's reply instead (wrap_model_call), where the gate sees it"
            )
            raise self.changed
        if self.runs and not self.deps.idempotent(call.tool):
            self.again = True
            raise RunAgain(
                f"a tool hook asked to run {call.tool} again; only a tool that declares "
                'metadata={"idempotent": True} runs twice'
            )
        self.runs += 1

    def refused_args(self) -> ToolMessage | None:
        """The error result a call with arguments its tool's schema refuses gets, as
        ``ToolNode`` gives it to the hooks (they decide what the model is shown), or None."""
        call = self.call
        problem = invocation_error(self.deps.tools[call.tool], call.args)
        if problem is None:
            return None
        return ToolMessage(problem, tool_call_id=call.id, name=call.tool, status="error")

    def execute(self, request: Any, run: Any) -> ToolMessage:
        self.check(request)
        refused = self.refused_args()
        if refused is not None:
            return refused
        try:
            value = run()
        except Exception as exc:
            self.error = self.error or exc
            raise
        return self.executed(value)

    def failure(self, exc: Exception) -> Exception:
        """What a call the hooks ended with ``exc`` failed of: a changed call is refused
        (``tool_denied``); a tool that could not run again failed as it did the first time."""
        if self.changed is not None:
            return self.changed
        return self.error if self.again and self.error is not None else exc

    def executed(self, value: Any) -> ToolMessage:
        """The tool's value as the ``ToolMessage`` hooks expect (content blocks as blocks, an
        artifact kept, as ``ToolNode`` gives it); the value itself is kept."""
        call, artifact = self.call, None
        if isinstance(value, ToolMessage):
            content, artifact = value.content, value.artifact
        elif isinstance(value, str) or is_blocks(value):
            content = value
        else:
            try:
                content = json.dumps(value, default=str)
            except Exception:  # circular or unencodable: to_observation shows it later
                content = repr(value)[:1000]
        message = ToolMessage(
            content=content, artifact=artifact, tool_call_id=call.id, name=call.tool
        )
        self.ran = (message, value)
        return message

    def value(self, result: Any) -> Any:
        """What the call returned: the tool's own value when a hook passed its message on."""
        if self.changed is not None:  # a hook swallowed the refusal: it still holds
            raise self.changed
        if self.again and self.error is not None:
            raise self.error
        if self.ran is not None and result is self.ran[0]:
            return self.ran[1]
        if not isinstance(result, ToolMessage):
            kind = type(result).__name__
            raise ToolMiddlewareError(
                f"a tool hook returned a {kind}, not a ToolMessage; only gated-react's nodes "
                "write the run's state"
            )
        # its content and artifact (tool_results); an error message is a failed call, shown to
        # the model in the hook's own words, as create_agent shows it
        return result
