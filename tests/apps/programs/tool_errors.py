# Origin: community project HaystackedAI/facloud_div, app/lc/static_model.py, tool-error
#   handling after LangChain's agents page ("Tool error handling")
# As its author wrote it: two @tool tools (search, get_weather(location)), a @wrap_tool_call
# middleware that turns a tool's exception into a ToolMessage for the model, create_agent with
# it and a system prompt, and one invoke.
# Changed: (a) the create_agent import; (b) none for the model: ChatOpenAI(model="gpt-5-nano")
# is pointed at the local chat-completions server by the harness. (The file first builds a
# plain agent and then rebinds it; both lines are kept.)
from langchain.agents.middleware import wrap_tool_call
from langchain.messages import ToolMessage
from langchain.tools import tool
from langchain_openai import ChatOpenAI
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent

model = ChatOpenAI(model="gpt-5-nano", max_tokens=1000, timeout=30)


@tool
def search(query: str) -> str:
    """Search for information."""
    return f"Results for: {query}"


@tool
def get_weather(location: str) -> str:
    """Get weather information for a location."""
    return f"Weather in {location}: Sunny, 72°F"


agent = create_agent(model, tools=[search, get_weather])


@wrap_tool_call
def handle_tool_errors(request, handler):
    """Handle tool execution errors with custom messages."""
    try:
        return handler(request)
    except Exception as e:
        # Return a custom error message to the model
        return ToolMessage(
            content=f"Tool error: Please check your input and try again. ({e!s})",
            tool_call_id=request.tool_call["id"],
        )


agent = create_agent(
    model=model,
    tools=[search, get_weather],
    middleware=[handle_tool_errors],
    system_prompt="You are a helpful assistant. Be concise and accurate.",
)

result = agent.invoke(
    {"messages": [{"role": "user", "content": "What's the weather in San Francisco?"}]}
)
