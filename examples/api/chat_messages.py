"""Chat messages in and out, as chat clients and apps written for create_agent send and read them.

Runs offline with a scripted model; use ChatOpenAI(model=..., temperature=0) for a real one.
"""

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import build_graph
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

model = ScriptedChatModel(
    replies=[
        call("get_user_profile", user_id=42),
        "Anna is on the pro plan.",
        call("get_user_billing", user_id=42),
        "She pays USD 49 a month.",
    ]
)
graph = build_graph(model, SUPPORT_TOOLS, checkpointer=InMemorySaver())
chat: RunnableConfig = {"configurable": {"thread_id": "chat-1"}}

question = {"role": "user", "content": "Which plan is user 42 on?"}
result = graph.invoke({"messages": [question]}, chat)
answer = result["messages"][-1].content  # "Anna is on the pro plan.", as with create_agent
print("answer:", answer)

# A follow-up on the same thread is a new run (fresh budgets) that sees the conversation,
# the earlier tool calls and results included; messages hold them as create_agent stores them.
result = graph.invoke({"messages": [{"role": "user", "content": "And what does she pay?"}]}, chat)
print("follow-up:", result["messages"][-1].content)
print("turns:", [message.type for message in result["messages"]])
