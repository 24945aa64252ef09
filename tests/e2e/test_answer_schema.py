"""Structured final answers (``Policy.answer_schema``) in whole runs: the schema in the prompt,
one reminder with the validation error, then ``invalid_action:answer_schema``."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, ConfigDict, Field

from gated_react import Policy, build_graph
from gated_react.models import chat_model
from gated_react.settings import Settings
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import REFUND_GOAL
from ..support.openai_server import FakeOpenAI, reply, tool_call
from ..support.results import invoked


class RefundDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    eligible: bool
    amount_usd: float = Field(ge=0)
    reason: str


GOOD = '{"eligible": true, "amount_usd": 49, "reason": "within 14 days"}'
POLICY = Policy(answer_schema=RefundDecision)


def _http_model(server: FakeOpenAI) -> Any:
    settings = Settings(OPENAI_BASE_URL=server.base_url, OPENAI_MAX_RETRIES=0)  # type: ignore[call-arg]
    return chat_model(settings)


def _system(messages: list[BaseMessage]) -> str:
    return str(messages[0].content)


def test_a_fitting_answer_succeeds_and_parses_back() -> None:
    model = ScriptedChatModel(replies=[call("get_user_billing", user_id=42), GOOD])
    out = invoked(build_graph(model, SUPPORT_TOOLS, policy=POLICY), {"goal": REFUND_GOAL})
    assert out["stop_reason"] == "success"
    decision = RefundDecision.model_validate_json(out["answer"])
    assert decision == RefundDecision(eligible=True, amount_usd=49.0, reason="within 14 days")
    schema = json.dumps(RefundDecision.model_json_schema())
    assert schema in _system(model.requests[0])


def test_a_miss_gets_one_reminder_with_the_error_then_succeeds() -> None:
    model = ScriptedChatModel(replies=["Yes, USD 49.", GOOD])
    out = invoked(build_graph(model, SUPPORT_TOOLS, policy=POLICY), {"goal": REFUND_GOAL})
    assert (out["stop_reason"], out["usage"]["steps"]) == ("success", 2)
    reminder = str(model.requests[1][-1].content)
    assert "answer_schema" in reminder
    assert "must be one JSON object fitting RefundDecision: not valid JSON" in reminder


def test_two_misses_stop_with_invalid_action_answer_schema() -> None:
    replies = ['{"eligible": true}', '{"eligible": true, "amount_usd": -1, "reason": "x"}']
    model = ScriptedChatModel(replies=replies)
    out = invoked(build_graph(model, SUPPORT_TOOLS, policy=POLICY), {"goal": REFUND_GOAL})
    assert (out["status"], out["stop_reason"]) == ("stopped", "invalid_action:answer_schema")
    assert out["answer"] is None
    assert "amount_usd: Input should be greater than or equal to 0" in out["message"]
    assert "amount_usd: Field required" in str(model.requests[1][-1].content)


def test_without_a_schema_the_prompt_and_answers_are_unchanged() -> None:
    model = ScriptedChatModel(replies=["Yes, USD 49."])
    out = invoked(build_graph(model, SUPPORT_TOOLS), {"goal": REFUND_GOAL})
    assert out["answer"] == "Yes, USD 49."
    assert "JSON schema" not in _system(model.requests[0])


def test_json_protocol_over_http_carries_the_answer_as_a_json_string() -> None:
    final = json.dumps({"kind": "final", "answer": GOOD})
    script = [
        reply('{"kind": "tool", "name": "get_user_billing", "args": {"user_id": 42}}'),
        reply(final),
    ]
    policy = Policy(protocol="json", answer_schema=RefundDecision)
    with FakeOpenAI(script) as server:
        graph = build_graph(_http_model(server), SUPPORT_TOOLS, policy=policy)
        out = invoked(graph, {"goal": REFUND_GOAL})
    assert out["stop_reason"] == "success"
    assert json.loads(out["answer"])["amount_usd"] == 49.0


def test_tools_protocol_over_http_reminds_then_succeeds() -> None:
    script = [tool_call("get_user_profile", user_id=42), reply("Anna"), reply(GOOD)]
    with FakeOpenAI(script) as server:
        graph = build_graph(_http_model(server), SUPPORT_TOOLS, policy=POLICY)
        out = invoked(graph, {"goal": REFUND_GOAL})
        reminder = server.requests[2]["messages"][-1]["content"]
    assert out["stop_reason"] == "success"
    assert "Your last reply was rejected (answer_schema" in reminder


class Payout(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amount: float = Field(alias="amountUsd")
    reason: str


def test_an_answer_with_an_alias_validates_back_after_success() -> None:
    model = ScriptedChatModel(replies=['{"amountUsd": 49, "reason": "within 14 days"}'])
    graph = build_graph(model, SUPPORT_TOOLS, policy=Policy(answer_schema=Payout))
    out = invoked(graph, {"goal": REFUND_GOAL})
    assert out["stop_reason"] == "success"
    assert Payout.model_validate_json(out["answer"]).amount == 49.0


def test_an_infinite_number_is_answer_schema_not_a_null_stored_as_success() -> None:
    infinite = '{"eligible": true, "amount_usd": 1e999, "reason": "x"}'
    model = ScriptedChatModel(replies=[infinite, infinite])  # one reminder, then the stop
    out = invoked(build_graph(model, SUPPORT_TOOLS, policy=POLICY), {"goal": REFUND_GOAL})
    assert out["stop_reason"] == "invalid_action:answer_schema"
    assert "does not read back" in out["message"]
