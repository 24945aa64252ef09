"""One agent calls another: as_tool() wraps a gated-react graph as a LangChain tool. The inner
agent's end (success or a stop reason) is the tool's result, never an exception.
Runs offline with scripted models."""

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from gated_react import Policy, as_tool, build_graph, result_of
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

inner = build_graph(
    ScriptedChatModel(replies=[call("get_user_billing", user_id=42)], cycle=True),
    SUPPORT_TOOLS,
    policy=Policy(allow=frozenset({"get_user_profile"})),  # billing is not allowed
)
refund_desk = as_tool(inner, "refund_desk", "Answers refund questions about one user.")

outer = build_graph(
    ScriptedChatModel(
        replies=[
            call("refund_desk", goal="User 42: refund?"),
            "The refund desk could not decide; a human will follow up.",
        ]
    ),
    [refund_desk],
    policy=Policy(budget={"max_tool_calls": 2}),
)
out = outer.invoke({"goal": "Handle ticket 7 from user 42."})
out = result_of(outer, out)  # with the run's answer and history
print("outer:", out["stop_reason"], "-", out["answer"])
print("inner:", out["history"][0]["observation"]["stop_reason"])

# Any LangChain agent can call it too.
helper = create_agent(
    ScriptedChatModel(replies=[call("refund_desk", goal="User 42: refund?"), "Escalated."]),
    tools=[refund_desk],
)
result = helper.invoke({"messages": [HumanMessage("ticket 8")]})
print("langchain:", result["messages"][-2].content)
