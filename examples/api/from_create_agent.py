"""A create_agent app, written as LangChain's docs write it (a system prompt, a tool that reads
the run's context and the store through ToolRuntime), running on gated-react with only the
constructor changed: the two marked lines. Offline: the model is LangChain's fake chat model
replaying a script; in an app it is "openai:gpt-4.1-mini" or any chat model."""

from dataclasses import dataclass
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.store.memory import InMemoryStore

from gated_react import build_graph  # was: from langchain.agents import create_agent


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake model; the script decides the calls, so binding tools changes nothing."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@dataclass
class Context:
    user_id: str


store = InMemoryStore()
store.put(("users",), "user_123", {"name": "John Smith", "language": "English"})


def get_user_info(runtime: ToolRuntime[Context]) -> str:
    """Look up user info."""
    assert runtime.store is not None
    user_id = runtime.context.user_id
    user_info = runtime.store.get(("users",), user_id)
    return str(user_info.value) if user_info else "Unknown user"


model = ScriptedModel(
    messages=iter(
        [
            AIMessage("", tool_calls=[{"name": "get_user_info", "args": {}, "id": "call_1"}]),
            AIMessage("Your name is John Smith."),
        ]
    )
)

agent = build_graph(  # was: agent = create_agent(
    model,
    tools=[get_user_info],
    system_prompt="You are a helpful assistant.",
    context_schema=Context,
    store=store,
)

result = agent.invoke(
    {"messages": [{"role": "user", "content": "What's my name?"}]},
    context=Context(user_id="user_123"),
)
print(result["messages"][-1].content)
