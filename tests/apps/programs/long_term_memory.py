# Origin: LangChain docs, "Long-term memory" (LangChain 1.0 version: tools read the store and
#   the user through ToolRuntime), sections "Read long-term memory in tools" and "Write
#   long-term memory from tools", run one after the other as on the page
#   https://docs.langchain.com/oss/python/langchain/long-term-memory
#   (langchain-ai/docs, src/oss/langchain/long-term-memory.mdx)
# As its authors wrote it: an InMemoryStore with one user, a @dataclass Context, a tool reading
# runtime.store and runtime.context.user_id, a tool writing a TypedDict UserInfo to the store,
# create_agent(..., store=store, context_schema=Context), invoke(..., context=Context(...)), and
# the store read back directly at the end.
# Changed: (a) the create_agent import; (b) the model "claude-sonnet-4-6" -> "openai:gpt-4.1",
# LangChain's ChatOpenAI on the local chat-completions server.
from dataclasses import dataclass

from langchain.tools import ToolRuntime, tool
from langgraph.store.memory import InMemoryStore
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent
from typing_extensions import TypedDict


@dataclass
class Context:
    user_id: str


# InMemoryStore saves data to an in-memory dictionary. Use a DB-backed store in production.
store = InMemoryStore()

store.put(
    ("users",),
    "user_123",
    {
        "name": "John Smith",
        "language": "English",
    },
)


@tool
def get_user_info(runtime: ToolRuntime[Context]) -> str:
    """Look up user info."""
    # Access the store - same as that provided to `create_agent`
    store = runtime.store
    user_id = runtime.context.user_id
    user_info = store.get(("users",), user_id)
    return str(user_info.value) if user_info else "Unknown user"


agent = create_agent(
    model="openai:gpt-4.1",  # was: "claude-sonnet-4-6"
    tools=[get_user_info],
    store=store,
    context_schema=Context,
)

agent.invoke(
    {"messages": [{"role": "user", "content": "look up user information"}]},
    context=Context(user_id="user_123"),
)


class UserInfo(TypedDict):
    name: str


@tool
def save_user_info(user_info: UserInfo, runtime: ToolRuntime[Context]) -> str:
    """Save user info."""
    store = runtime.store
    user_id = runtime.context.user_id
    store.put(("users",), user_id, user_info)
    return "Successfully saved user info."


agent = create_agent(
    model="openai:gpt-4.1",  # was: "claude-sonnet-4-6"
    tools=[save_user_info],
    store=store,
    context_schema=Context,
)

agent.invoke(
    {"messages": [{"role": "user", "content": "My name is John Smith"}]},
    context=Context(user_id="user_123"),
)

# You can access the store directly to get the value
store.get(("users",), "user_123").value  # noqa: B018 (the page's last line, a notebook cell)
