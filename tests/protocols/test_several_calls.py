"""The prompt says how many calls a reply may make: exactly one under the default
``max_parallel_calls=1``, up to N otherwise. Before, every protocol told the model "exactly one"
even under ``max_parallel_calls=16`` (a tester's ``LIKE_CREATE_AGENT`` policy), so the model never
made the parallel calls the policy admits."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from langchain_core.messages import AIMessage, SystemMessage

from gated_react import Policy, build_graph
from gated_react.protocols import PROTOCOLS
from gated_react.protocols.jsonmode import action_schema
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.results import invoked


@pytest.mark.parametrize("protocol", ["json", "text"])
def test_each_protocol_teaches_the_calls_a_reply_may_make(protocol: str) -> None:
    one = PROTOCOLS[protocol].instructions(SUPPORT_TOOLS)
    several = PROTOCOLS[protocol].instructions(SUPPORT_TOOLS, 16)
    assert "up to" not in one
    assert "up to 16" in several
    assert one == PROTOCOLS[protocol].instructions(SUPPORT_TOOLS, 1)


def test_native_tool_calling_needs_no_reply_format() -> None:
    """The tools are bound (one call per reply asked of the client where it takes it), and
    the contract refuses a reply with more calls than the policy allows."""
    assert PROTOCOLS["tools"].instructions(SUPPORT_TOOLS) == ""
    assert PROTOCOLS["tools"].instructions(SUPPORT_TOOLS, 16) == ""


def _system(max_calls: int, protocol: str = "json") -> str:
    model = ScriptedChatModel(replies=["done"])
    policy = Policy(max_parallel_calls=max_calls, protocol=protocol)  # type: ignore[arg-type]
    build_graph(model, SUPPORT_TOOLS, policy=policy).invoke({"goal": "g"})
    first = model.requests[0][0]
    assert isinstance(first, SystemMessage)
    return first.text


def test_the_system_prompt_says_one_call_by_default_and_up_to_n_otherwise() -> None:
    assert "Each turn you propose exactly one next action." in _system(1)
    several = _system(16)
    assert "exactly one next action" not in several
    assert "up to 16 at once" in several


def test_the_json_schema_admits_a_list_of_calls_only_when_the_policy_does() -> None:
    first = {"kind": "tool", "name": "get_user_profile", "args": {"user_id": 4}}
    second = {"kind": "tool", "name": "get_user_billing", "args": {"user_id": 4}}
    final: dict[str, Any] = {"kind": "final", "answer": "x"}
    one = action_schema(SUPPORT_TOOLS, Policy(protocol="json"))
    three = action_schema(SUPPORT_TOOLS, Policy(protocol="json", max_parallel_calls=3))
    jsonschema.validate(first, one)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([first, second], one)
    jsonschema.validate([first, second], three)
    for refused in ([first] * 4, [first, final], []):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(refused, three)


def test_a_model_that_follows_the_prompt_gets_its_calls_run_at_once() -> None:
    names = ("get_user_profile", "get_user_billing")
    calls = [call(name, user_id=42).tool_calls[0] for name in names]
    model = ScriptedChatModel(replies=[AIMessage("", tool_calls=calls), "done"])
    policy = Policy(max_parallel_calls=2)
    out = invoked(build_graph(model, SUPPORT_TOOLS, policy=policy), {"goal": "g"})
    assert out["stop_reason"] == "success"
    assert [h["action"]["name"] for h in out["history"]] == ["get_user_profile", "get_user_billing"]
