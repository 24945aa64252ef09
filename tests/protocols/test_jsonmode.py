from __future__ import annotations

import json

from gated_react.policy import Policy
from gated_react.protocols.jsonmode import JsonProtocol, action_schema
from gated_react.state import Reply
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

PROTOCOL = JsonProtocol()


def test_candidate_is_the_parsed_text() -> None:
    reply = Reply(text='{"kind": "tool", "name": "get_user_profile", "args": {"user_id": 42}}')
    assert PROTOCOL.candidate(reply, {})["args"] == {"user_id": 42}


def test_schema_admits_exactly_the_allowed_tools_and_final() -> None:
    schema = action_schema(SUPPORT_TOOLS[:2], Policy())
    branches = schema["anyOf"]
    names = [b["properties"]["name"]["enum"] for b in branches if "name" in b["properties"]]
    assert names == [["get_user_profile"], ["get_user_billing"]]
    assert all(b["additionalProperties"] is False for b in branches)
    args = branches[0]["properties"]["args"]
    assert args["properties"]["user_id"]["type"] == "integer"
    assert args["required"] == ["user_id"]
    assert branches[-1]["properties"]["kind"]["enum"] == ["final"]
    json.dumps(schema)


def test_caps_bound_strings_and_integers() -> None:
    schema = action_schema(SUPPORT_TOOLS, Policy(schema_max_string=80, schema_max_integer=1000))
    text = json.dumps(schema)
    assert '"maxLength": 80' in text
    user_id = schema["anyOf"][0]["properties"]["args"]["properties"]["user_id"]
    assert user_id["maximum"] == 1000
    assert user_id["minimum"] == 1  # the tool's own tighter bound is kept
    query = schema["anyOf"][2]["properties"]["args"]["properties"]["query"]
    assert query["maxLength"] == 80
    assert schema["anyOf"][-1]["properties"]["answer"]["maxLength"] == 80


def test_bind_requests_the_schema_or_plain_json_object() -> None:
    model = ScriptedChatModel(replies=[])
    bound = PROTOCOL.bind(model, SUPPORT_TOOLS, Policy(protocol="json"))
    fmt = bound.kwargs["response_format"]  # type: ignore[attr-defined]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["anyOf"]
    plain = PROTOCOL.bind(model, SUPPORT_TOOLS, Policy(protocol="json", json_schema=False))
    assert plain.kwargs["response_format"] == {"type": "json_object"}  # type: ignore[attr-defined]
    assert "get_user_billing" in PROTOCOL.instructions(SUPPORT_TOOLS)
