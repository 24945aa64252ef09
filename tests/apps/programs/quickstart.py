# Origin: LangChain docs, Quickstart, "Build a real-world agent", full example code
#   https://docs.langchain.com/oss/python/langchain/quickstart
#   (langchain-ai/docs, src/oss/langchain/quickstart.mdx at 0140e109da4c)
# The program as its authors wrote it: a @dataclass context and response format,
# response_format=ToolStrategy(ResponseFormat), an InMemorySaver, two turns on one thread,
# print(response['structured_response']) after each.
# Changed: (a) the create_agent import (the harness picks the constructor); (b) the model,
# "claude-sonnet-4-6" -> "openai:gpt-4.1": LangChain's ChatOpenAI, which the harness points at
# the local chat-completions server.
from dataclasses import dataclass

from langchain.agents.structured_output import ToolStrategy
from langchain.chat_models import init_chat_model
from langchain.tools import ToolRuntime, tool
from langgraph.checkpoint.memory import InMemorySaver
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent

SYSTEM_PROMPT = """You are an expert weather forecaster, who speaks in puns.

You have access to two tools:

- get_weather_for_location: use this to get the weather for a specific location
- get_user_location: use this to get the user's location

If a user asks you for the weather, make sure you know the location. If you can tell from the question that they mean wherever they are, use the get_user_location tool to find their location."""  # noqa: E501


@dataclass
class Context:
    """Custom runtime context schema."""

    user_id: str


@tool
def get_weather_for_location(city: str) -> str:
    """Get weather for a given city."""
    return f"It's always sunny in {city}!"


@tool
def get_user_location(runtime: ToolRuntime[Context]) -> str:
    """Retrieve user information based on user ID."""
    user_id = runtime.context.user_id
    return "Florida" if user_id == "1" else "SF"


model = init_chat_model("openai:gpt-4.1", temperature=0)  # was: "claude-sonnet-4-6"


@dataclass
class ResponseFormat:
    """Response schema for the agent."""

    # A punny response (always required)
    punny_response: str
    # Any interesting information about the weather if available
    weather_conditions: str | None = None


checkpointer = InMemorySaver()

agent = create_agent(
    model=model,
    system_prompt=SYSTEM_PROMPT,
    tools=[get_user_location, get_weather_for_location],
    context_schema=Context,
    response_format=ToolStrategy(ResponseFormat),
    checkpointer=checkpointer,
)

config = {"configurable": {"thread_id": "1"}}

response = agent.invoke(
    {"messages": [{"role": "user", "content": "what is the weather outside?"}]},
    config=config,
    context=Context(user_id="1"),
)

print(response["structured_response"])

response = agent.invoke(
    {"messages": [{"role": "user", "content": "thank you!"}]},
    config=config,
    context=Context(user_id="1"),
)

print(response["structured_response"])
