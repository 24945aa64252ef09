"""LangChain's ``create_agent`` with the refund graph's tools and model, get_user_billing behind
its human-in-the-loop middleware: the reference the browser test holds gated-react to (the
same page must show the same cards and panels for both). Served by ``langgraph dev`` from the
config the test writes; not part of the package."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware

from gated_react.models import chat_model
from gated_react.settings import Settings
from gated_react.tools import load_toolkit

approvals = HumanInTheLoopMiddleware(
    interrupt_on={"get_user_billing": {"allowed_decisions": ["approve", "edit", "reject"]}}
)
graph = create_agent(chat_model(Settings()), load_toolkit("support"), middleware=[approvals])
