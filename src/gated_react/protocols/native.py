"""Native tool calling: the model is bound to the tool schemas and answers with tool calls."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from gated_react._engine.conversation.transcript import content_of
from gated_react._engine.model.contract import ActionError, check_count
from gated_react.policy import Policy
from gated_react.state import HistoryEntry, Reply


def one_call_per_reply(model: BaseChatModel) -> dict[str, Any]:
    """Ask the provider for one tool call per reply wherever its ``bind_tools`` takes
    ``parallel_tool_calls`` (OpenAI and Anthropic do; OpenAI's models call tools in parallel
    by default). A provider that ignores it still meets the contract: two calls in one reply
    are ``invalid_action:multiple_actions``."""
    try:
        parameters = inspect.signature(model.bind_tools).parameters
    except (TypeError, ValueError):
        return {}
    return {"parallel_tool_calls": False} if "parallel_tool_calls" in parameters else {}


class ToolsProtocol:
    """A reply with one tool call is a tool action; a reply with text and no call is final."""

    answer_is_text = True

    def bind(
        self, model: BaseChatModel, tools: Sequence[BaseTool], policy: Policy
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        if not tools:
            return model
        try:
            ask = one_call_per_reply(model) if policy.max_parallel_calls == 1 else {}
            return model.bind_tools(list(tools), **ask)
        except NotImplementedError:
            # LangChain's fake chat models cannot bind tools but reply with tool calls: such a
            # model is called as it is, and its replies meet the same contract.
            return model

    def instructions(self, tools: Sequence[BaseTool], max_calls: int = 1) -> str:
        """Nothing: the tools are bound, so the model needs no reply format (a reply with
        more calls than ``max_calls`` is refused by the contract, and asked again)."""
        return ""

    def candidate(self, reply: Reply, tools: Mapping[str, BaseTool], max_calls: int = 1) -> Any:
        check_count(len(reply.tool_calls) + len(reply.invalid_tool_calls), max_calls)
        if reply.invalid_tool_calls:
            bad = reply.invalid_tool_calls[0]
            name, error = str(bad.get("name"))[:60], str(bad.get("error") or "")
            # decide's own reasons are one short line; a client's parse error quotes the args
            why = error if error and len(error) <= 80 and "\n" not in error else "not valid JSON"
            raise ActionError("bad_json", f"arguments of tool call {name!r} refused: {why}")
        found = [
            {"kind": "tool", "name": call.get("name"), "args": call.get("args")}
            for call in reply.tool_calls
        ]
        if not found:
            return {"kind": "final", "answer": reply.text}
        return found[0] if len(found) == 1 else found

    def replay(self, entries: Sequence[HistoryEntry]) -> list[BaseMessage]:
        """The assistant's tool calls, then one ``ToolMessage`` per call, as in any chat app,
        under the ids the calls have in ``messages`` (made up for steps recorded without)."""
        ids = [entry.action.id or f"call_{entry.step}_{i}" for i, entry in enumerate(entries)]
        calls = [
            {"name": entry.action.name, "args": entry.action.args, "id": id_, "type": "tool_call"}
            for entry, id_ in zip(entries, ids, strict=True)
        ]
        results = [
            ToolMessage(
                content_of(entry.observation),
                tool_call_id=id_,
                name=entry.action.name,
                id=entry.message_id,
            )
            for entry, id_ in zip(entries, ids, strict=True)
        ]
        return [AIMessage("", tool_calls=calls), *results]
