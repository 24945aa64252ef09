# Origin: LangChain docs, "Build a RAG agent with LangChain", section "RAG agents"
#   https://docs.langchain.com/oss/python/langchain/rag
#   (langchain-ai/docs, src/oss/langchain/rag.mdx at 0ea0323fd527)
# As its authors wrote it: a vector store of the blog post's chunks, the retrieve_context tool
# with response_format="content_and_artifact" returning (serialized, retrieved_docs), the
# system prompt, create_agent(model, tools, system_prompt=prompt), and the stream loop that
# pretty-prints event["messages"][-1] for each "values" event.
# Changed: (a) the create_agent import; (b) offline: the model is "openai:gpt-4.1" on the local
# chat-completions server; the blog post (WebBaseLoader + RecursiveCharacterTextSplitter) is
# four of its chunks written out as Documents with the loader's metadata; the vector store
# and its embeddings are tests/apps/offline.py's TinyVectorStore (shared words, no service).
from langchain.chat_models import init_chat_model
from langchain.tools import tool
from langchain_core.documents import Document
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent
from tests.apps.offline import TinyVectorStore

model = init_chat_model("openai:gpt-4.1")
vector_store = TinyVectorStore()  # was: InMemoryVectorStore(OpenAIEmbeddings(...))

SOURCE = {"source": "https://lilianweng.github.io/posts/2023-06-23-agent/"}
all_splits = [  # was: WebBaseLoader(...).load() split by RecursiveCharacterTextSplitter
    Document(page_content=text, metadata=dict(SOURCE, start_index=start))
    for start, text in [
        (0, "LLM Powered Autonomous Agents. Agent System Overview."),
        (1200, "Task decomposition can be done by LLM with simple prompting, Chain of Thought."),
        (2400, "Tree of Thoughts extends CoT by exploring multiple reasoning possibilities."),
        (3600, "Component One: Planning. A complicated task involves many steps."),
    ]
]
document_ids = vector_store.add_documents(documents=all_splits)


@tool(response_format="content_and_artifact")
def retrieve_context(query: str):
    """Retrieve information to help answer a query."""
    retrieved_docs = vector_store.similarity_search(query, k=2)
    serialized = "\n\n".join(
        (f"Source: {doc.metadata}\nContent: {doc.page_content}") for doc in retrieved_docs
    )
    return serialized, retrieved_docs


tools = [retrieve_context]
# If desired, specify custom instructions
prompt = (
    "You have access to a tool that retrieves context from a blog post. "
    "Use the tool to help answer user queries."
)
agent = create_agent(model, tools, system_prompt=prompt)

query = (
    "What is the standard method for Task Decomposition?\n\n"
    "Once you get the answer, look up common extensions of that method."
)

for event in agent.stream(
    {"messages": [{"role": "user", "content": query}]},
    stream_mode="values",
):
    event["messages"][-1].pretty_print()
