# Origin: LangChain docs, "Short-term memory", sections "Trim messages" (a @before_model hook
#   that keeps the first message and the latest ones) and "Delete messages" (an @after_model
#   hook that removes the two oldest, watched with stream_mode="values")
#   https://docs.langchain.com/oss/python/langchain/short-term-memory
#   (langchain-ai/docs, src/oss/langchain/short-term-memory.mdx)
# As its authors wrote it: both hooks return RemoveMessage updates (REMOVE_ALL_MESSAGES then
# the kept messages; one RemoveMessage per deleted id); an InMemorySaver; four turns on one
# thread for the trim, the last answer pretty-printed; three turns streamed as values for the
# deletion, each event's messages printed as (type, content).
# Changed: (a) the create_agent import; (b) none for the models: "gpt-5" and "gpt-5-nano" are
# LangChain's ChatOpenAI, which the harness points at the local chat-completions server. The
# page's `tools=[...]` is its own get_weather from the same page's first example; the message
# counts are printed after each part, so the trims show.
from typing import Any

from langchain.agents import AgentState
from langchain.agents.middleware import after_model, before_model
from langchain.messages import RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent


def get_weather(city: str) -> str:
    """Get weather for a given city."""
    return f"It's always sunny in {city}!"


@before_model
def trim_messages(state: AgentState, runtime: Runtime) -> dict[str, Any] | None:
    """Keep only the last few messages to fit context window."""
    messages = state["messages"]

    if len(messages) <= 3:
        return None  # No changes needed

    first_msg = messages[0]
    recent_messages = messages[-3:] if len(messages) % 2 == 0 else messages[-4:]
    new_messages = [first_msg, *recent_messages]

    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new_messages]}


agent = create_agent(
    "gpt-5",
    tools=[get_weather],
    middleware=[trim_messages],
    checkpointer=InMemorySaver(),
)

config: RunnableConfig = {"configurable": {"thread_id": "1"}}
agent.invoke({"messages": "hi, my name is bob"}, config)
agent.invoke({"messages": "write a short poem about cats"}, config)
agent.invoke({"messages": "now do the same but for dogs"}, config)
final_response = agent.invoke({"messages": "what's my name?"}, config)

final_response["messages"][-1].pretty_print()
print(len(agent.get_state(config).values["messages"]))


@after_model
def delete_old_messages(state: AgentState, runtime: Runtime) -> dict | None:
    """Remove old messages to keep conversation manageable."""
    messages = state["messages"]
    if len(messages) > 2:
        # remove the earliest two messages
        return {"messages": [RemoveMessage(id=m.id) for m in messages[:2]]}
    return None


agent = create_agent(
    model="gpt-5-nano",
    tools=[],
    system_prompt="Please be concise and to the point.",
    middleware=[delete_old_messages],
    checkpointer=InMemorySaver(),
)

config: RunnableConfig = {"configurable": {"thread_id": "1"}}

for event in agent.stream(
    {"messages": [{"role": "user", "content": "hi! I'm bob"}]},
    config,
    stream_mode="values",
):
    print([(message.type, message.content) for message in event["messages"]])

for event in agent.stream(
    {"messages": [{"role": "user", "content": "write a short poem about cats"}]},
    config,
    stream_mode="values",
):
    print([(message.type, message.content) for message in event["messages"]])

for event in agent.stream(
    {"messages": [{"role": "user", "content": "what's my name?"}]},
    config,
    stream_mode="values",
):
    print([(message.type, message.content) for message in event["messages"]])

print(len(agent.get_state(config).values["messages"]))
