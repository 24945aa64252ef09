# Origin: community project TmrlnSh/ai-course, langchain/class1/streaming.py, a chat with
#   SummarizationMiddleware after LangChain's short-term memory page
# As its author wrote it: create_agent with SummarizationMiddleware (its own summary model,
# max_tokens_before_summary / messages_to_keep, the names of LangChain 1.0's first releases),
# an InMemorySaver, four turns on one thread given as plain strings ({"messages": "..."}),
# the message counts printed, and the last answer pretty-printed.
# Changed: (a) the create_agent import; (b) none for the models: "openai:gpt-4o" and
# "openai:gpt-4o-mini" are LangChain's ChatOpenAI, which the harness points at the local
# chat-completions server.
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent

checkpointer = InMemorySaver()

agent = create_agent(
    model="openai:gpt-4o",
    middleware=[
        SummarizationMiddleware(
            model="openai:gpt-4o-mini",
            max_tokens_before_summary=4000,  # Trigger summarization at 4000 tokens
            messages_to_keep=10,  # Keep last 20 messages after summary
        )
    ],
    checkpointer=checkpointer,
)

config: RunnableConfig = {"configurable": {"thread_id": "1"}}
agent.invoke({"messages": "hi, my name is bob"}, config)
agent.invoke({"messages": "write a short poem about cats"}, config)
result = agent.invoke({"messages": "now do the same but for dogs"}, config)
print(len(result["messages"]))

print("######################################")
final_response = agent.invoke({"messages": "what's my name?"}, config)

print(len(final_response["messages"]))

final_response["messages"][-1].pretty_print()
