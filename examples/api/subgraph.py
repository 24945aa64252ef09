"""The agent as a node of your own StateGraph: route refund questions into it, post-process
its answer, and escalate when it stops. Runs offline with a scripted model."""

from typing import Literal, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from gated_react import Policy, build_graph
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

replies = [call("get_user_billing", user_id=42), "Yes: USD 49.00 goes back to your card."]
agent = build_graph(
    ScriptedChatModel(replies=replies),
    SUPPORT_TOOLS,
    policy=Policy(allow=frozenset({"get_user_billing", "search_policy"})),
)


class Desk(TypedDict, total=False):
    question: str
    goal: str  # the agent's input
    messages: list[AnyMessage]  # the agent's output: the conversation, its answer last
    stop_reason: str | None  # and how the run ended
    reply: str


def route(state: Desk) -> dict:
    return {"goal": state["question"]}


def pick(state: Desk) -> Literal["refunds", "faq"]:
    return "refunds" if "refund" in state["question"].lower() else "faq"


def faq(state: Desk) -> dict:
    return {"reply": "See our FAQ."}


def post(state: Desk) -> dict:
    if state["stop_reason"] != "success":
        return {"reply": f"Passed to a human ({state['stop_reason']})."}
    return {"reply": state["messages"][-1].text + " Anything else?"}


desk = StateGraph(Desk)
desk.add_node("route", route)
desk.add_node("refunds", agent)  # the compiled graph is the node
desk.add_node("faq", faq)
desk.add_node("post", post)
desk.add_edge(START, "route")
desk.add_conditional_edges("route", pick)
desk.add_edge("refunds", "post")
desk.add_edge("faq", END)
desk.add_edge("post", END)
app = desk.compile(checkpointer=InMemorySaver())

for ticket, question in enumerate(["User 42: refund?", "Opening hours?"]):
    out = app.invoke({"question": question}, {"configurable": {"thread_id": f"ticket-{ticket}"}})
    print(out["reply"])
