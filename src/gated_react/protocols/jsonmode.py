"""JSON protocol: the reply is one JSON object; servers that support it are held to a schema."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from gated_react._engine.conversation.transcript import replies
from gated_react._engine.model.contract import check_count, load_json
from gated_react.policy import Policy
from gated_react.protocols.catalog import args_schema, describe
from gated_react.state import HistoryEntry, Reply

_INSTRUCTIONS = """\
Reply with exactly one JSON object and nothing else, in one of two shapes:
1) {{"kind": "tool", "name": "<tool name>", "args": {{...}}}}
2) {{"kind": "final", "answer": "<short final answer>"}}
No Markdown, no extra keys. The tools you may call:
{catalog}"""


_SEVERAL = (
    "For calls that do not depend on each other's results, the reply may instead be a JSON "
    "list of up to {n} tool objects (shape 1): they run at once."
)


def _cap(schema: Any, max_string: int | None, max_integer: int | None) -> Any:
    """Bound every string and integer so a constrained decoder cannot run past max_tokens."""
    if isinstance(schema, list):
        return [_cap(item, max_string, max_integer) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _cap(value, max_string, max_integer) for key, value in schema.items()}
    if out.get("type") == "string" and max_string and "enum" not in out and "const" not in out:
        out["maxLength"] = min(out.get("maxLength", max_string), max_string)
    if out.get("type") == "integer" and max_integer:
        out["minimum"] = max(out.get("minimum", -max_integer), -max_integer)
        out["maximum"] = min(out.get("maximum", max_integer), max_integer)
    return out


def action_schema(tools: Sequence[BaseTool], policy: Policy) -> dict[str, Any]:
    """A JSON schema that admits exactly the contract's actions for the given tools."""
    branches: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": ["tool"]},
                "name": {"type": "string", "enum": [tool.name]},
                "args": args_schema(tool),
            },
            "required": ["kind", "name", "args"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    branches.append(
        {
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": ["final"]},
                "answer": {"type": "string", "minLength": 1},
            },
            "required": ["kind", "answer"],
            "additionalProperties": False,
        }
    )
    if policy.max_parallel_calls > 1 and tools:  # several calls at once: a list of them
        calls = {"anyOf": branches[:-1]}
        n = policy.max_parallel_calls
        branches.append({"type": "array", "items": calls, "minItems": 1, "maxItems": n})
    schema = {"anyOf": branches}
    return _cap(schema, policy.schema_max_string, policy.schema_max_integer)  # type: ignore[no-any-return]


class JsonProtocol:
    """Seed 000's contract: the reply text is the action object."""

    answer_is_text = False

    def bind(
        self, model: BaseChatModel, tools: Sequence[BaseTool], policy: Policy
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        if not policy.json_schema:
            return model.bind(response_format={"type": "json_object"})
        schema = {"name": "action", "schema": action_schema(tools, policy), "strict": False}
        return model.bind(response_format={"type": "json_schema", "json_schema": schema})

    def instructions(self, tools: Sequence[BaseTool], max_calls: int = 1) -> str:
        text = _INSTRUCTIONS.format(catalog=json.dumps(describe(tools), ensure_ascii=False))
        return text if max_calls == 1 else f"{text}\n{_SEVERAL.format(n=max_calls)}"

    def candidate(self, reply: Reply, tools: Mapping[str, BaseTool], max_calls: int = 1) -> Any:
        """The object; a JSON list of actions is several calls, held to ``max_calls`` like
        native tool calls (a list of two once ran both under the default of one)."""
        found = load_json(reply.text)
        if isinstance(found, list):
            check_count(len(found), max_calls)
        return found

    def replay(self, entries: Sequence[HistoryEntry]) -> list[BaseMessage]:
        """Each call as the JSON object the model wrote, then its observation."""
        return replies(entries, _as_json)


def _as_json(entry: HistoryEntry) -> str:
    action = {"kind": "tool", "name": entry.action.name, "args": entry.action.args}
    return json.dumps(action, ensure_ascii=False)
