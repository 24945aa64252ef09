# Origin: LangChain docs, "Build a SQL agent", step "Implement human-in-the-loop review"
#   (LangChain 1.0 version, stream_mode="values" loops)
#   https://docs.langchain.com/oss/python/langchain/sql-agent
#   (langchain-ai/docs, src/oss/langchain/sql-agent.mdx)
# The page's last step, run after the rest of the page as a reader runs it top to bottom: the
# page's first part is sql_agent.py (imported, so it runs first, prints included). As its
# authors wrote it: HumanInTheLoopMiddleware(interrupt_on={"sql_db_query": True},
# description_prefix=...), an InMemorySaver, the stream loop that prints the interrupt's
# descriptions, and the resume with Command(resume={"decisions": [{"type": "approve"}]}).
# Changed: (a) the create_agent import; (b) nothing else (the model and database are
# sql_agent.py's).
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from sql_agent import model, system_prompt, tools
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent

agent = create_agent(
    model,
    tools,
    system_prompt=system_prompt,
    middleware=[
        HumanInTheLoopMiddleware(
            interrupt_on={"sql_db_query": True},
            description_prefix="Tool execution pending approval",
        ),
    ],
    checkpointer=InMemorySaver(),
)

question = "Which genre on average has the longest tracks?"
config = {"configurable": {"thread_id": "1"}}

for step in agent.stream(
    {"messages": [{"role": "user", "content": question}]},
    config,
    stream_mode="values",
):
    if "__interrupt__" in step:
        print("INTERRUPTED:")
        interrupt = step["__interrupt__"][0]
        for request in interrupt.value["action_requests"]:
            print(request["description"])
    elif "messages" in step:
        step["messages"][-1].pretty_print()
    else:
        pass

for step in agent.stream(
    Command(resume={"decisions": [{"type": "approve"}]}),
    config,
    stream_mode="values",
):
    if "messages" in step:
        step["messages"][-1].pretty_print()
    else:
        pass
