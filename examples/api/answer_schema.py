"""Structured final answers: Policy.answer_schema makes the answer one JSON object of your
pydantic model, which invoke returns validated under structured_response. A miss gets one
reminder carrying the validation error, then the run stops with invalid_action:answer_schema.
Runs offline with a scripted model."""

from pydantic import BaseModel, Field

from gated_react import Policy, build_graph, result_of
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS


class RefundDecision(BaseModel):
    eligible: bool
    amount_usd: float = Field(ge=0)
    reason: str


model = ScriptedChatModel(
    replies=[
        call("get_user_billing", user_id=42),
        "Yes, USD 49.",  # not JSON: the model gets a reminder with the error
        '{"eligible": true, "amount_usd": 49, "reason": "paid 10 days ago, within 14 days"}',
    ]
)
graph = build_graph(model, SUPPORT_TOOLS, policy=Policy(answer_schema=RefundDecision))
out = graph.invoke({"goal": "User 42: refund? Amount in USD."})
decision: RefundDecision = out["structured_response"]  # None unless the run succeeded
print(out["stop_reason"], decision.eligible, decision.amount_usd)
print("steps:", result_of(graph, out)["usage"]["steps"])  # the run's record counts them
