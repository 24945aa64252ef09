# Origin: community project ppriewe88/mcp-agents, agents/mcp_api/langchain_stream_test.py
#   (commit af85c05cf10a), a stream-modes demo after LangChain's streaming page
# As its author wrote it: a plain function tool, create_agent, then four loops: "updates"
# printing each step's data['messages'][-1].content_blocks, "messages" printing the node and
# each token's content_blocks, ["messages", "updates"] together rendering chunks and the
# "model" / "tools" nodes' last messages, and astream "updates" under asyncio.
# Changed: (a) the create_agent import (both places it is imported); (b) none for the models:
# "gpt-5-nano" and "openai:gpt-5.2" are LangChain's ChatOpenAI, which the harness points at
# the local chat-completions server.
from langchain.messages import AIMessage, AIMessageChunk, AnyMessage, ToolMessage
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent


#######################################################
def get_weather(city: str) -> str:
    """Get weather for a given city."""

    return f"It's always sunny in {city}!"


agent = create_agent(
    model="gpt-5-nano",
    tools=[get_weather],
)
for chunk in agent.stream(
    {"messages": [{"role": "user", "content": "What is the weather in SF?"}]},
    stream_mode="updates",
):
    for step, data in chunk.items():
        print(f"step: {step}")
        print(f"content: {data['messages'][-1].content_blocks}")

#######################################################

for token, metadata in agent.stream(
    {"messages": [{"role": "user", "content": "What is the weather in SF?"}]},
    stream_mode="messages",
):
    print(f"node: {metadata['langgraph_node']}")
    print(f"content: {token.content_blocks}")
    print("\n")

#######################################################

agent = create_agent("openai:gpt-5.2", tools=[get_weather])


def _render_message_chunk(token: AIMessageChunk) -> None:
    if token.text:
        print(token.text, end="|")
    if token.tool_call_chunks:
        print(token.tool_call_chunks)


def _render_completed_message(message: AnyMessage) -> None:
    if isinstance(message, AIMessage) and message.tool_calls:
        print(f"Tool calls: {message.tool_calls}")
    if isinstance(message, ToolMessage):
        print(f"Tool response: {message.content_blocks}")
    if isinstance(message, AIMessage) and not message.tool_calls:
        print(f"Model response: {message.content}")


input_message = {
    "role": "user",
    "content": "What is the weather in Boston? and please add 'Best regards'.",
}
for stream_mode, data in agent.stream(
    {"messages": [input_message]},
    stream_mode=["messages", "updates"],
):
    if stream_mode == "messages":
        token, metadata = data
        if isinstance(token, AIMessageChunk):
            _render_message_chunk(token)
    if stream_mode == "updates":
        for source, update in data.items():
            if source in ("model", "tools"):  # `source` captures node name
                _render_completed_message(update["messages"][-1])


async def run():
    agent = create_agent("openai:gpt-5.2", tools=[get_weather])
    async for chunk in agent.astream(
        {"messages": [{"role": "user", "content": "What is the weather in SF?"}]},
        stream_mode="updates",
    ):
        for step, data in chunk.items():
            print(f"step: {step}")
            print(f"content: {data['messages'][-1].content_blocks}")


if __name__ == "__main__":
    import asyncio

    asyncio.run(run())
