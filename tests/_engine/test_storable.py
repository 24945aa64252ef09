"""Outside values made storable: the helpers, and the crashes they fixed (regression tests).

Each end-to-end case below raised out of ``invoke`` before: a ValidationError, "Maximum
serialization depth exceeded", or the checkpointer's "Integer exceeds 64-bit range".
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Policy, build_graph
from gated_react._engine.storable import (
    MAX_NESTING,
    Unstorable,
    clean_text,
    error_text,
    json_data,
    plain,
)
from gated_react.nodes.decide import reply_of
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.calculator import calculate
from gated_react.tools.support import SUPPORT_TOOLS


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_plain_cleans_strings_and_keys() -> None:
    assert plain({"k\ud800": ["a\udfffb", 1, 2.5, None, True]}) == {
        "k\ufffd": ["a\ufffdb", 1, 2.5, None, True]
    }
    assert type(clean_text(AIMessage("x").text)) is str  # a str subclass pydantic refused


@pytest.mark.parametrize("number", [2**64 - 1, -(2**63), 10**18])
def test_plain_keeps_64_bit_integers(number: int) -> None:
    assert plain({"n": number}) == {"n": number}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (2**64, "an integer outside the 64-bit range (65 bits; from -2**63 to 2**64-1)"),
        (-(2**63) - 1, "an integer outside the 64-bit range (64 bits; from -2**63 to 2**64-1)"),
        (10**30, "an integer outside the 64-bit range (100 bits; from -2**63 to 2**64-1)"),
        ([10**5000], "an integer outside the 64-bit range (16610 bits; from -2**63 to 2**64-1)"),
        (nested(MAX_NESTING + 1), f"values nested deeper than {MAX_NESTING} levels"),
    ],
)
def test_plain_refuses_what_no_store_holds(value: Any, message: str) -> None:
    with pytest.raises(Unstorable, match=f"^{re.escape(message)}$"):
        plain(value)


def test_plain_refuses_cycles_and_accepts_the_nesting_limit() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(Unstorable, match="nested deeper"):
        plain(loop)
    assert plain(nested(MAX_NESTING)) == nested(MAX_NESTING)


def test_error_text_never_raises_and_masks_secrets() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert error_text(Broken()) == "(message cannot be shown)"
    text = error_text(
        ValueError("key opaque-token-123 at\npostgresql://u:hunter2@h/db"), "opaque-token-123"
    )
    assert "hunter2" not in text
    assert "opaque-token-123" not in text
    assert "\n" not in text


def test_the_clients_own_key_is_masked_wherever_a_reply_echoes_it() -> None:
    key = "opaque-key-0123"
    message = AIMessage(
        f"the key is {key}",
        tool_calls=[{"name": "t", "args": {"k": [key]}, "id": "1"}],
        invalid_tool_calls=[{"name": "u", "args": f'{{"k": "{key}', "id": "2", "error": key}],
    )
    assert key not in reply_of(message, (key,)).model_dump_json()
    assert clean_text(f"x{key}x", (key,)) == "x***x"


def test_reply_of_cleans_text_and_moves_unstorable_calls() -> None:
    message = AIMessage(
        "think \ud800",
        tool_calls=[
            {"name": "a", "args": {"n": 10**30}, "id": "1"},
            {"name": "b", "args": {"q": "\udc80"}, "id": "2"},
        ],
    )
    reply = reply_of(message)
    assert reply.text == "think \ufffd"
    assert reply.tool_calls == [{"name": "b", "args": {"q": "\ufffd"}, "id": "2"}]
    assert reply.invalid_tool_calls[0]["name"] == "a"
    assert "64" in reply.invalid_tool_calls[0]["error"]


@tool
def deep() -> Any:
    """Returns a value nested 300 levels deep."""
    return nested(300)


BIG = '{"kind": "tool", "name": "get_user_profile", "args": {"user_id": 1' + "0" * 25 + "}}"
DEEP = json.dumps({"kind": "tool", "name": "get_user_profile", "args": {"x": nested(300)}})
CASES = [
    ("tools", [AIMessage("answer \ud800")], SUPPORT_TOOLS, "success", "answer \ufffd"),
    ("text", ["Finish: answer \ud800"], SUPPORT_TOOLS, "success", "answer \ufffd"),
    ("json", [BIG], SUPPORT_TOOLS, "invalid_action:bad_json", "(84 bits; from -2**63 to 2**64-1)"),
    ("json", [DEEP], SUPPORT_TOOLS, "invalid_action:bad_json", "deeper than 64 levels"),
    (
        "tools",
        [call("search_policy", query=nested(300))],
        SUPPORT_TOOLS,
        "invalid_action:bad_json",
        "deeper than 64 levels",
    ),
    (
        "tools",
        [call("get_user_profile", user_id=10**30)],
        SUPPORT_TOOLS,
        "invalid_action:bad_json",
        "(100 bits; from -2**63 to 2**64-1)",
    ),
    (
        "tools",
        [call("calculate", expression="2 ** 100"), "big"],
        [calculate],
        "success",
        str(2**100),
    ),
    ("tools", [call("deep"), "deep"], [deep], "success", "[[[[[["),
]


@pytest.mark.parametrize(("protocol", "replies", "tools", "reason", "shows"), CASES)
def test_durable_runs_survive_what_models_and_tools_produce(
    protocol: str, replies: list[Any], tools: list[Any], reason: str, shows: str
) -> None:
    saver = InMemorySaver()  # serializes every checkpoint, as the durable stores do
    graph = build_graph(
        ScriptedChatModel(replies=replies),
        tools,
        policy=Policy(protocol=protocol),  # type: ignore[arg-type]
        checkpointer=saver,
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"goal": "g"}, config)
    assert out["stop_reason"] == reason, out["message"]
    assert graph.get_state(config).values["stop_reason"] == reason
    assert shows in json.dumps(out, ensure_ascii=False, default=str)


class _Opaque:
    """A value a provider might put in its metadata: no JSON, and no class a store revives."""


def test_json_data_keeps_json_and_leaves_the_rest_out() -> None:
    shown = {
        "finish_reason": "stop",
        "created": 1.5,
        "n": 3,
        "nan": float("nan"),
        "big": 2**70,
        "object": _Opaque(),
        "logprobs": [None, True, _Opaque(), "a\ud800"],
        "echo": "key sk-secret-123",
        7: "seven",
    }
    assert json_data(shown, secrets=("sk-secret-123",)) == {
        "finish_reason": "stop",
        "created": 1.5,
        "n": 3,
        "logprobs": [None, True, "a\ufffd"],
        "echo": "key ***",
        "7": "seven",
    }
    assert json_data(nested(MAX_NESTING + 1)) == nested(MAX_NESTING)  # the deepest list goes
    assert json_data(_Opaque()) is None
