"""Hypothesis strategies for hostile model output: text, JSON values and action-shaped objects."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import strategies as st

PARSER_EXAMPLES = int(os.environ.get("GATED_REACT_FUZZ_EXAMPLES", "400"))
RUN_EXAMPLES = int(os.environ.get("GATED_REACT_FUZZ_RUNS", "200"))

# Code points that break naive text handling: lone surrogates (a JSON "\ud800" escape decodes
# to one), NUL, BOM, zero-width and direction marks, line and paragraph separators.
ODD = ("\ud800", "\udfff", "\udc80", "\x00", "\ufeff", "\u200b", "\u202e", "\u2028", "\r", "\t")
chars = st.characters() | st.sampled_from(ODD)
any_text = st.text(chars, max_size=80)


@st.composite
def non_utf8_looking(draw: st.DrawFn) -> str:
    """Bytes that are not UTF-8, read the ways programs do: escaped surrogates, Latin-1."""
    raw = draw(st.binary(min_size=1, max_size=40))
    how = draw(st.sampled_from(["surrogateescape", "latin-1", "replace"]))
    if how == "latin-1":
        return raw.decode("latin-1")
    return raw.decode("utf-8", errors=how)


strings = any_text | non_utf8_looking()
numbers = (
    st.integers()
    | st.integers(min_value=2**63 - 5, max_value=2**70)
    | st.integers(min_value=-(2**70), max_value=-(2**63) + 5)
    | st.floats(allow_nan=False, allow_infinity=False)
)
scalars = st.none() | st.booleans() | numbers | strings
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(strings, inner, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(strings, json_values, max_size=5)
TOOL_NAMES = ("get_user_profile", "calculate", "read_file", "describe_database", "search")
names = (
    st.sampled_from(TOOL_NAMES)
    | strings
    | numbers
    | st.none()
    | st.lists(scalars, max_size=2)
    | st.just("  ")
)


@st.composite
def action_shaped(draw: st.DrawFn) -> Any:
    """Objects near the contract: right or wrong kind, names, args, answers and extra keys."""
    kind = draw(st.sampled_from(["tool", "final"]) | json_values)
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["kind"] = kind
    if draw(st.booleans()):
        out["name"] = draw(names)
    if draw(st.booleans()):
        out["args"] = draw(json_objects | json_values)
    if draw(st.booleans()):
        out["answer"] = draw(strings | json_values)
    if draw(st.integers(0, 4)) == 0:
        out[draw(strings)] = draw(json_values)
    return out


def nested(depth: int, kind: str = "list") -> Any:
    value: Any = [] if kind == "list" else {}
    for _ in range(depth - 1):
        value = [value] if kind == "list" else {"k": value}
    return value


@st.composite
def duplicated_json(draw: st.DrawFn) -> str:
    """A JSON object text in which one key appears twice, at the top or inside ``args``."""
    key = draw(st.text(max_size=8))
    first, second = draw(json_values), draw(json_values)
    members = [json.dumps(key), ":", json.dumps(first), ",", json.dumps(key), ":"]
    members.append(json.dumps(second))
    body = "{" + "".join(members) + "}"
    if draw(st.booleans()):
        return '{"kind": "tool", "name": "calculate", "args": ' + body + "}"
    return body


@st.composite
def react_text(draw: st.DrawFn) -> str:
    """ReAct-looking replies assembled from labels, names, bracket calls and JSON inputs."""
    label = st.sampled_from(
        [
            *("Thought", "Action", "Action Input", "action input", "ACTION", "Observation"),
            *("Finish", "Final Answer", "final_answer", "**Action**", "> Action", "Act ion"),
        ]
    )
    parts = []
    for _ in range(draw(st.integers(1, 5))):
        name = draw(st.sampled_from(TOOL_NAMES) | any_text)
        body = draw(
            st.sampled_from(
                [
                    name,
                    f"{name}[{draw(any_text)}]",
                    f"{name}[]",
                    f"`{name}`",
                    json.dumps(draw(json_values)),
                    draw(any_text),
                ]
            )
        )
        spacing = draw(st.sampled_from([":", " :", ": ", ":\n", "::"]))
        parts.append(f"{draw(label)}{spacing}{body}")
    return draw(st.sampled_from(["\n", "\r\n", " ", "\n\n"])).join(parts)


def reply_texts() -> st.SearchStrategy[str]:
    """Everything a model could send as text."""
    return (
        strings
        | json_values.map(json.dumps)
        | action_shaped().map(lambda obj: json.dumps(obj, ensure_ascii=False))
        | action_shaped().map(lambda obj: "```json\n" + json.dumps(obj) + "\n```")
        | duplicated_json()
        | react_text()
    )
