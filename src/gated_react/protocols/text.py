"""Classic ReAct text: ``Thought:`` / ``Action:`` / ``Action Input:`` / ``Finish:``.

Also seed 001's bracket form: ``Action: read_file[src/cart.py]``, ``Action: finish[answer]``.
Several ``Action:`` blocks in one reply are several calls (``multiple_actions`` beyond
``Policy.max_parallel_calls``); anything after a made-up ``Observation:`` is discarded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import BaseModel, TypeAdapter, ValidationError

from gated_react._engine.conversation.transcript import replies
from gated_react._engine.model.contract import ActionError, check_count, load_json
from gated_react.policy import Policy
from gated_react.protocols.catalog import all_params, describe, required_params
from gated_react.state import HistoryEntry, Reply

_INSTRUCTIONS = """\
Reply in this format, in English labels, and stop after the action:
Thought: <what you know and what is missing>
Action: <tool name>
Action Input: <JSON object with the tool's arguments>
A tool with one argument may also be called as: Action: <tool name>[<argument>]
When the facts suffice, reply instead:
Thought: <why you can answer>
Finish: <your final answer>
Never write an Observation line: the system adds it. The tools you may call:
{catalog}"""

_SEVERAL = (
    "In one reply, up to {n} Action / Action Input pairs are that many calls at once, for "
    "calls that do not depend on each other's results."
)

# A label at the start of a line: the markers that separate blocks of a ReAct reply.
_LABEL = re.compile(
    r"^[ \t>*#_-]*"
    r"(thought|action[ \t]*input|action|observation|finish|final[ \t_]*answer)"
    r"[ \t*_]*:",
    re.IGNORECASE | re.MULTILINE,
)
_NAME = re.compile(r"^[A-Za-z_][\w.-]{0,127}$")
_BRACKET = re.compile(r"^([A-Za-z_][\w.-]{0,127})[ \t]*\[(.*)\]$", re.DOTALL)


def _blocks(text: str) -> list[tuple[str, str]]:
    """``[(label, body), ...]`` in order, labels lower-cased with spacing removed."""
    found = list(_LABEL.finditer(text))
    blocks = []
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        label = re.sub(r"[\s_]+", "", match.group(1).lower())
        blocks.append((label, text[match.end() : end].strip()))
    return blocks


def parse_text(
    text: str, tools: Mapping[str, BaseTool], max_calls: int = 1
) -> dict[str, Any] | list[dict[str, Any]]:
    """Turn a ReAct reply into a contract candidate (a list for several actions), or raise
    ``ActionError``. The actions are those before the first ``Observation:`` or ``Finish:``
    that follows one: what comes after is the model imagining the next turn."""
    blocks = _blocks(text)
    actions: list[dict[str, Any]] = []
    for i, (label, body) in enumerate(blocks):
        if label in ("finish", "finalanswer", "observation") and actions:
            break
        if label in ("finish", "finalanswer"):
            return {"kind": "final", "answer": body}
        if label == "action":
            following = blocks[i + 1] if i + 1 < len(blocks) else None
            raw_input = following[1] if following and following[0] == "actioninput" else None
            found = _action(body, raw_input, tools)
            if found["kind"] == "final":  # finish[...]: an answer, or the end of the actions
                if actions:
                    break
                return found
            actions.append(found)
    if not actions:
        raise ActionError("no_action", "the reply has neither an 'Action:' nor a 'Finish:' line")
    check_count(len(actions), max_calls)
    return actions[0] if len(actions) == 1 else actions


def _action(body: str, raw_input: str | None, tools: Mapping[str, BaseTool]) -> dict[str, Any]:
    body = body.strip("`* \t")
    # The whole body first (a multi-line finish[...]), then the first line alone, so a remark
    # written after the closing bracket does not hide the action.
    bracket = _BRACKET.match(body) or _BRACKET.match(body.split("\n", 1)[0].rstrip("`* \t"))
    if bracket:
        name, argument = bracket.group(1), bracket.group(2).strip()
        if name.lower() == "finish":
            return {"kind": "final", "answer": argument}
        return {"kind": "tool", "name": name, "args": _bracket_args(name, argument, tools)}
    name = body.splitlines()[0].strip().strip("`*") if body else ""
    if not _NAME.match(name):
        raise ActionError("missing_tool_name", f"no tool name after 'Action:' (got {name[:60]!r})")
    args = None if raw_input in (None, "") else load_json(raw_input)
    return {"kind": "tool", "name": name, "args": args}


def _bracket_args(name: str, argument: str, tools: Mapping[str, BaseTool]) -> dict[str, Any]:
    """Map ``tool[argument]`` onto the tool's single parameter, typed by its schema."""
    tool = tools.get(name)
    if tool is None:
        return {}  # the gate reports tool_missing:<name>, the more useful reason
    required = required_params(tool)
    params = required or all_params(tool)
    if not params and not argument:
        return {}  # ``describe_database[]``: a tool without parameters
    if len(params) != 1 or len(required) > 1:
        raise ActionError(
            "bad_args", f"{name}[...] takes one argument, but {name} has parameters {params[:5]}"
        )
    return {params[0]: _typed(tool, params[0], argument)}


def _typed(tool: BaseTool, param: str, argument: str) -> Any:
    """Coerce the bracket text to the parameter's type; keep the text when it does not fit."""
    schema = tool.args_schema
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return argument
    field = schema.model_fields.get(param)
    if field is None or field.annotation is None or field.annotation is str:
        return argument
    try:
        value = TypeAdapter(field.annotation).validate_python(argument)
        json.dumps(value)
        return value
    except (ValidationError, TypeError, ValueError):
        return argument


class TextProtocol:
    """ReAct text with a stop sequence, so the model does not write its own observation."""

    answer_is_text = False

    def bind(
        self, model: BaseChatModel, tools: Sequence[BaseTool], policy: Policy
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        return model.bind(stop=["\nObservation:"])

    def instructions(self, tools: Sequence[BaseTool], max_calls: int = 1) -> str:
        text = _INSTRUCTIONS.format(catalog=json.dumps(describe(tools), ensure_ascii=False))
        return text if max_calls == 1 else f"{text}\n{_SEVERAL.format(n=max_calls)}"

    def candidate(self, reply: Reply, tools: Mapping[str, BaseTool], max_calls: int = 1) -> Any:
        return parse_text(reply.text, tools, max_calls)

    def replay(self, entries: Sequence[HistoryEntry]) -> list[BaseMessage]:
        """Each call as the Action lines the model wrote, then its observation."""
        return replies(entries, _as_text)


def _as_text(entry: HistoryEntry) -> str:
    args = json.dumps(entry.action.args, ensure_ascii=False)
    return f"Action: {entry.action.name}\nAction Input: {args}"
