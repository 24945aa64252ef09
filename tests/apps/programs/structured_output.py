# Origin: LangChain docs, "Structured output", section "Provider strategy", the Pydantic model
#   tab (response_format=ContactInfo, which picks ProviderStrategy for a model that supports it)
#   https://docs.langchain.com/oss/python/langchain/structured-output
#   (langchain-ai/docs, src/oss/langchain/structured-output.mdx)
# As its authors wrote it: a pydantic ContactInfo with field descriptions, create_agent with
# response_format=ContactInfo, one invoke, print(result["structured_response"]).
# Changed: (a) the create_agent import; (b) none for the model: "gpt-5" is LangChain's
# ChatOpenAI, which the harness points at the local chat-completions server.
from pydantic import BaseModel, Field
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent


class ContactInfo(BaseModel):
    """Contact information for a person."""

    name: str = Field(description="The name of the person")
    email: str = Field(description="The email address of the person")
    phone: str = Field(description="The phone number of the person")


agent = create_agent(
    model="gpt-5",
    response_format=ContactInfo,  # Auto-selects ProviderStrategy
)

result = agent.invoke(
    {
        "messages": [
            {
                "role": "user",
                "content": "Extract contact info from: John Doe, john@example.com, (555) 123-4567",
            }
        ]
    }
)

print(result["structured_response"])
