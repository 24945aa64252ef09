# Origin: LangChain docs, "Short-term memory", section "Customizing agent memory" (an
#   AgentState subclass given as state_schema, its fields passed to invoke)
#   https://docs.langchain.com/oss/python/langchain/short-term-memory
#   (langchain-ai/docs, src/oss/langchain/short-term-memory.mdx)
# As its authors wrote it: CustomAgentState(AgentState) with user_id and preferences,
# create_agent(..., state_schema=CustomAgentState, checkpointer=InMemorySaver()), and an
# invoke passing the custom fields with the message on a thread.
# Changed: (a) the create_agent import; (b) none for the model: "gpt-5" is LangChain's
# ChatOpenAI, which the harness points at the local chat-completions server. The page leaves
# its tool get_user_info undefined; it is defined here, reading the custom state as the
# page's "Read short-term memory in a tool" section does (runtime.state).
from langchain.agents import AgentState
from langchain.tools import ToolRuntime, tool
from langgraph.checkpoint.memory import InMemorySaver
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent


class CustomAgentState(AgentState):
    user_id: str
    preferences: dict


@tool
def get_user_info(runtime: ToolRuntime) -> str:
    """Look up user info."""
    user_id = runtime.state["user_id"]
    return "User is John Smith" if user_id == "user_123" else "Unknown user"


agent = create_agent(
    "gpt-5",
    tools=[get_user_info],
    state_schema=CustomAgentState,
    checkpointer=InMemorySaver(),
)

# Custom state can be passed in invoke
result = agent.invoke(
    {
        "messages": [{"role": "user", "content": "Hello"}],
        "user_id": "user_123",
        "preferences": {"theme": "dark"},
    },
    {"configurable": {"thread_id": "1"}},
)
