"""The action contract: a reply becomes exactly one tool call or one final answer, or is rejected.

Everything here is pure and never raises anything but ``ActionError``, whose ``why`` becomes the
stop reason ``invalid_action:<why>``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from pydantic import BaseModel, ValidationError

from gated_react._engine.storable import Unstorable, clean_text, plain
from gated_react.errors import GatedReactError, validation_line
from gated_react.state import FinalAction, ToolAction, ToolCalls

_FINAL_KEYS = frozenset({"kind", "answer"})
_TOOL_KEYS = frozenset({"kind", "name", "args"})


class ActionError(GatedReactError):
    """A reply broke the contract; ``why`` is the short code, the message says what was wrong."""

    def __init__(self, why: str, message: str) -> None:
        super().__init__(message)
        self.why = why


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):  # counted once: list.count per key took minutes on 1 MB
        dupes = sorted(key for key, n in Counter(key for key, _ in pairs).items() if n > 1)
        raise ActionError("bad_json", f"duplicate keys in JSON object: {dupes[:5]}")
    return found


def strip_fence(text: str) -> str:
    """Remove one surrounding Markdown code fence, the one wrapper models add unasked."""
    body = text.strip()
    if body.startswith("```") and body.endswith("```") and len(body) >= 6:
        body = body[3:-3]
        first, _, rest = body.partition("\n")
        body = rest if first.strip().isalpha() or not first.strip() else body
    return body.strip()


def load_json(text: str) -> Any:
    """Parse JSON strictly: duplicate keys, NaN and anything but one value are rejected, and
    so is what no checkpointer could store (``untrusted.plain``)."""
    try:
        return plain(
            json.loads(
                strip_fence(text),
                object_pairs_hook=_reject_duplicates,
                parse_constant=_no_constants,
            )
        )
    except ActionError:
        raise
    except Unstorable as exc:
        raise ActionError("bad_json", f"JSON that cannot be accepted: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ActionError("bad_json", f"not valid JSON: {str(exc)[:200]}") from None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_contract(candidate: Any) -> ToolAction | FinalAction:
    """Apply the contract to a parsed object: ``{"kind": "tool", "name", "args"}`` or
    ``{"kind": "final", "answer"}`` and nothing else."""
    if not isinstance(candidate, dict):
        raise ActionError("not_object", f"expected a JSON object, got {type(candidate).__name__}")
    kind = candidate.get("kind")
    if kind == "final":
        return _final(candidate)
    if kind == "tool":
        return _tool(candidate)
    shown = kind[:50] if isinstance(kind, str) else type(kind).__name__
    raise ActionError("bad_kind", f"kind must be 'tool' or 'final', got {shown!r}")


def check_count(count: int, max_calls: int) -> None:
    """More tool calls in one reply than ``Policy.max_parallel_calls`` allows: the same
    ``multiple_actions`` in every protocol, before any call is looked at."""
    if count > max_calls:
        allowed = "one is" if max_calls == 1 else f"{max_calls} are"
        raise ActionError("multiple_actions", f"{count} tool calls in one reply; {allowed} allowed")


def check_calls(candidates: list[Any]) -> ToolCalls:
    """Several tool calls from one reply, each held to the contract of a tool call."""
    if len(candidates) < 2:  # one call is a ToolAction, none a final answer
        raise ActionError("bad_kind", f"a list of calls holds two or more, got {len(candidates)}")
    calls = []
    for candidate in candidates:
        action = check_contract(candidate)
        if not isinstance(action, ToolAction):
            raise ActionError("bad_kind", "every call of a reply with several must be a tool call")
        calls.append(action)
    return ToolCalls(calls=calls)


def _final(candidate: dict[Any, Any]) -> FinalAction:
    extra = set(candidate) - _FINAL_KEYS
    if extra:
        raise ActionError("extra_keys", f"unexpected keys for a final answer: {_names(extra)}")
    answer = candidate.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise ActionError("missing_answer", "a final answer needs a non-blank 'answer' string")
    return FinalAction(answer=clean_text(answer.strip()))


def _tool(candidate: dict[Any, Any]) -> ToolAction:
    extra = set(candidate) - _TOOL_KEYS
    if extra:
        raise ActionError("extra_keys", f"unexpected keys for a tool call: {_names(extra)}")
    name = candidate.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ActionError("missing_tool_name", "a tool call needs a non-empty 'name' string")
    args = candidate.get("args")
    if args is None:
        args = {}
    if not isinstance(args, dict) or not all(isinstance(key, str) for key in args):
        raise ActionError("bad_args", f"'args' must be a JSON object, got {type(args).__name__}")
    try:
        args = plain(args)  # the protocols already did this; a direct caller may not have
    except Unstorable as exc:
        raise ActionError("bad_args", f"'args' cannot be accepted: {exc}") from None
    return ToolAction(name=clean_text(name.strip()), args=args)


def _names(keys: set[Any]) -> list[str]:
    return sorted(str(key)[:40] for key in keys)[:5]


def check_answer(action: FinalAction, schema: type[BaseModel]) -> FinalAction:
    """A final answer whose text is one JSON object fitting ``schema``, rewritten as that
    object's canonical JSON (fields under their aliases), which must validate back:
    ``schema.model_validate_json(answer)`` is what callers do with it. Anything else is
    ``answer_schema``."""
    try:
        data = load_json(action.answer)
    except ActionError as err:
        raise ActionError(
            "answer_schema", f"the answer must be one JSON object fitting {schema.__name__}: {err}"
        ) from None
    try:
        fitted = schema.model_validate(data)
    except ValidationError as exc:
        problems = validation_line(exc, root="answer")
        raise ActionError(
            "answer_schema", f"the answer does not fit {schema.__name__}: {problems}"
        ) from None
    return FinalAction(answer=_read_back(fitted, schema))


def _read_back(fitted: BaseModel, schema: type[BaseModel]) -> str:
    """The canonical JSON of ``fitted``, once it is known to validate as ``schema`` again: an
    infinite float is written as null, and a serialization alias may not be a name validation
    takes."""
    try:
        text = fitted.model_dump_json(by_alias=True)
        schema.model_validate_json(text)
    except (ValidationError, ValueError) as exc:  # PydanticSerializationError is a ValueError
        problems = (
            validation_line(exc, root="answer") if isinstance(exc, ValidationError) else str(exc)
        )
        raise ActionError(
            "answer_schema",
            f"the answer fits {schema.__name__} but does not read back as one once stored "
            f"(as JSON): {problems[:300]}",
        ) from None
    return text
