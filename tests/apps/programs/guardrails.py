# Origin: LangChain docs, "Guardrails", section "PII detection" (the create_agent with three
#   PIIMiddleware instances)
#   https://docs.langchain.com/oss/python/langchain/guardrails
#   (langchain-ai/docs, src/oss/langchain/guardrails.mdx)
# As its authors wrote it: e-mail redacted, credit card masked, API keys blocked (a custom
# regex detector), all on the input, then one invoke with an e-mail address and a card number.
# Changed: (a) the create_agent import; (b) the model "gpt-4.1" is LangChain's ChatOpenAI,
# which the harness points at the local chat-completions server (the line is unchanged). The
# page leaves its two tools undefined (customer_service_tool, email_tool); they are defined
# here as the smallest tools of those names.
from langchain.agents.middleware import PIIMiddleware
from langchain.tools import tool
from tests.apps.constructor import create_agent  # was: from langchain.agents import create_agent


@tool
def customer_service_tool(question: str) -> str:
    """Answer a customer service question."""
    return f"Customer service received: {question}"


@tool
def email_tool(to: str, body: str) -> str:
    """Send an e-mail."""
    return f"Sent to {to}"


agent = create_agent(
    model="gpt-4.1",
    tools=[customer_service_tool, email_tool],
    middleware=[
        # Redact emails in user input before sending to model
        PIIMiddleware(
            "email",
            strategy="redact",
            apply_to_input=True,
        ),
        # Mask credit cards in user input
        PIIMiddleware(
            "credit_card",
            strategy="mask",
            apply_to_input=True,
        ),
        # Block API keys - raise error if detected
        PIIMiddleware(
            "api_key",
            detector=r"sk-[a-zA-Z0-9]{32}",
            strategy="block",
            apply_to_input=True,
        ),
    ],
)

# When user provides PII, it will be handled according to the strategy
result = agent.invoke(
    {
        "messages": [
            {
                "role": "user",
                "content": "My email is john.doe@example.com and card is 5105-1051-0510-5100",
            }
        ]
    }
)
