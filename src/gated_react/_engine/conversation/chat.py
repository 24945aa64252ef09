"""The conversation as ``messages`` holds it, as ``create_agent`` stores it: what chat clients draw
and what a later turn sends back to a model.

Each step is an ``AIMessage`` with the step's tool calls (written by ``validate``, before the
gate may pause on a question, so a waiting call is always the last message), then one
``ToolMessage`` per call (``observe``; for calls that never ran, whichever node ended the run
says why, ``status="error"``). Every tool call id is answered: the history is valid input to
any OpenAI-compatible API.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from pydantic import TypeAdapter, ValidationError

from gated_react._engine.model.contract import ActionError
from gated_react._engine.storable import Unstorable, clean_text, json_data, plain
from gated_react.state import Reply, ToolAction

if TYPE_CHECKING:
    from gated_react._engine.deps import NodeDeps


def call_id(message_id: str, index: int) -> str:
    """A stable id for a call the model gave none (JSON and text protocols, some servers): made
    from its reply's id and its place, short enough for every API (OpenAI takes 40 chars)."""
    return "call_" + hashlib.sha256(f"{message_id}:{index}".encode()).hexdigest()[:24]


def with_ids(
    actions: list[ToolAction], reply: Reply, used: AbstractSet[str] = frozenset()
) -> tuple[list[ToolAction], str]:
    """The calls with an id each (the model's, else a stable one made from the reply's id and
    the call's place), and the id of the message that holds them (the reply's). An id the
    run has used already, or that the reply gives twice, is replaced the same way: a result
    answers one call, so no two calls of a run share an id."""
    message_id = reply.id or str(uuid.uuid4())
    given = [call.get("id") for call in reply.tool_calls]
    named, taken = [], set()
    for i, action in enumerate(actions):
        found = given[i] if i < len(given) else None
        fresh = found and found not in taken and found not in used
        chosen = found if fresh else call_id(message_id, i)
        taken.add(chosen)
        named.append(action.model_copy(update={"id": chosen}))
    return named, message_id


def proposed(
    actions: Iterable[ToolAction], text: str, message_id: str, reply: Reply | None = None
) -> AIMessage:
    """The AI message of a step: the text the model wrote with its calls, and the calls."""
    calls = [{"name": a.name, "args": a.args, "id": a.id, "type": "tool_call"} for a in actions]
    return AIMessage(text, tool_calls=calls, id=message_id, **kept(reply))


def said(text: str, message_id: str | None = None, reply: Reply | None = None) -> AIMessage:
    """An AI message of text alone (an answer, or what the model wrote as it streamed)."""
    return AIMessage(text, id=message_id or str(uuid.uuid4()), **kept(reply))


_USAGE: TypeAdapter[UsageMetadata] = TypeAdapter(UsageMetadata)


def metadata_of(message: BaseMessage, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """What a reply says of itself that ``create_agent`` keeps on the stored AI message: its
    token counts (valid as LangChain's ``UsageMetadata``, else none) and the provider's
    metadata (finish reason, model name, id), as plain JSON with the client's key masked.
    Anything else could not be stored, or the store's serializer would refuse to read it back."""
    usage = json_data(getattr(message, "usage_metadata", None), secrets)
    try:
        usage = dict(_USAGE.validate_python(usage)) if usage else None
    except ValidationError:  # a hook or a client wrote something else: counts are optional
        usage = None
    response = json_data(getattr(message, "response_metadata", None), secrets)
    extra = json_data(getattr(message, "additional_kwargs", None), secrets)
    if isinstance(extra, dict):
        extra = {k: v for k, v in extra.items() if k not in _CALLS} or None
    return {"usage_metadata": usage, "response_metadata": response or None,
            "additional_kwargs": extra if isinstance(extra, dict) else None}  # fmt: skip


_CALLS = ("tool_calls", "function_call")
"""The provider's own copy of the calls, which the message holds as its ``tool_calls``."""


def kept(reply: Reply | None) -> dict[str, Any]:
    """The reply's metadata, as the AI messages stored of it carry it."""
    if reply is None:
        return {}
    out: dict[str, Any] = {}
    if reply.usage_metadata:
        out["usage_metadata"] = reply.usage_metadata
    if reply.response_metadata:
        out["response_metadata"] = reply.response_metadata
    if reply.additional_kwargs:
        out["additional_kwargs"] = reply.additional_kwargs
    return out


def result(
    tool: str, tool_call_id: str | None, content: str | list[Any], *, ok: bool, artifact: Any = None
) -> ToolMessage:
    """The answer to one tool call: its result (text, or content blocks) and any artifact, or
    (``status="error"``) why it has none."""
    return ToolMessage(
        content,
        tool_call_id=tool_call_id or "",
        name=tool,
        status="success" if ok else "error",
        artifact=artifact,
        id=str(uuid.uuid4()),
    )


EDIT_NOTE = (
    "Note: a human reviewer replaced this call before it ran, on purpose: {tool} was called "
    "with {args} instead of the arguments in your call. Do not repeat your original call."
)
"""What a call's result says when a human edited its arguments: the model's own call stays in
its message (as ``create_agent`` keeps it), so the result says what ran instead."""


EDITED = "edited_args"
"""The mark (``response_metadata``) of a result whose call a human edited before it ran: the
arguments it ran with."""


EDIT_NOTED = "edit_note"
"""The mark (``response_metadata``) of the note an edited call's result opens with."""


def edited(
    message: ToolMessage, text: str, args: dict[str, Any], note: str | None = None
) -> ToolMessage:
    """``message``, the result of a call a human replaced with ``args`` before it ran: its
    ``text`` after the note that says so (``note``: a reviewing middleware's own words, else
    ours), and marked with ``args``, what the history shows."""
    note = _edit_note(str(message.name), args) if note is None else note
    metadata = {**message.response_metadata, EDITED: args, EDIT_NOTED: note}
    return message.model_copy(update={"content": note + text, "response_metadata": metadata})


def as_ran(call: Mapping[str, Any], message: ToolMessage) -> tuple[dict[str, Any], str]:
    """A call's arguments and its result's text as the call ran: for a call a human edited,
    the arguments its result is marked with and the text after the note (the AI message
    keeps the model's own call)."""
    args = message.response_metadata.get(EDITED)
    if not isinstance(args, dict):
        return dict(call.get("args") or {}), message.text
    note = message.response_metadata.get(EDIT_NOTED)
    if not isinstance(note, str):  # written before the note was marked: ours
        note = _edit_note(str(message.name), args)
    return args, message.text.removeprefix(note)


def _edit_note(tool: str, args: dict[str, Any]) -> str:
    shown = json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
    return f"{EDIT_NOTE.format(tool=tool, args=shown)}\n\nResult:\n"


NOT_RUN = "not_run"
"""The mark (``response_metadata``) of a result that says its call never ran."""


def not_run(calls: Iterable[dict[str, Any]], why: str) -> list[ToolMessage]:
    """Error results for tool calls (as an AI message holds them) that never ran, marked so:
    no view of the run's calls takes them for results."""
    return [
        result(str(c.get("name")), str(c.get("id")), why, ok=False).model_copy(
            update={"response_metadata": {NOT_RUN: True}}
        )
        for c in calls
    ]


def ran(message: ToolMessage) -> bool:
    """Whether a result is one (its call ran, or the gate answered it), not a not-run note
    (marked so; a thread written before 0.1.0 wrote them unmarked, as ``not run...`` errors)."""
    if message.response_metadata.get(NOT_RUN):
        return False
    legacy = message.status == "error" and message.text.startswith("not run")
    return not legacy


def proposal(deps: NodeDeps, reply: Reply) -> list[ToolAction]:
    """The tool calls a reply makes, as the protocol reads them (none when it reads none, or
    reads something the contract could never take): what joins the conversation before the
    contract is applied to them."""
    if deps.structured is not None and any(
        call.get("name") in deps.structured.outputs for call in reply.tool_calls
    ):
        return []  # the answer (finish writes it), not an action
    try:
        found = deps.protocol.candidate(reply, deps.tools, len(reply.tool_calls) + 64)
    except ActionError:
        return []
    found = found if isinstance(found, list) else [found]
    actions = []
    for candidate in found:
        if not isinstance(candidate, dict) or candidate.get("kind") != "tool":
            return []
        name, args = candidate.get("name"), candidate.get("args")
        if not isinstance(name, str) or not isinstance(args, dict):
            return []
        actions.append(ToolAction(name=name, args=args))
    return actions


def reply_of(message: BaseMessage, secrets: tuple[str, ...] = ()) -> Reply:
    """The reply as the step holds it: text cleaned (and the client's key masked, should a
    server echo it), a tool call whose arguments no store could hold moved to
    ``invalid_tool_calls`` with the reason (the contract says bad_json), and an id always."""
    calls, invalid = [], []
    for c in getattr(message, "tool_calls", []):
        name = plain(c["name"], secrets=secrets)
        try:
            args = plain(c["args"], secrets=secrets)
            calls.append({"name": name, "args": args, "id": plain(c.get("id"), secrets=secrets)})
        except Unstorable as exc:
            invalid.append({"name": name, "args": None, "error": str(exc)})
    invalid += [
        {key: plain(c.get(key), secrets=secrets) for key in ("name", "args", "error")}
        for c in getattr(message, "invalid_tool_calls", [])
    ]
    text = message.text if isinstance(message.text, str) else str(message.content)
    return Reply(
        id=message.id or f"run-{uuid.uuid4()}",  # named, so its calls' ids hold
        text=clean_text(text, secrets),
        tool_calls=calls,
        invalid_tool_calls=invalid,
        **metadata_of(message, secrets),
    )
