"""An MCP tool's arguments are checked against the JSON schema its server gave, before anything
is sent (tests/support/mcp_servers.py's ``transfer(amount: int)`` and its ledger): an unknown
key or a wrong type is ``tool_bad_args:<tool>`` and never reaches the server."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Policy, build_graph, resume, run
from gated_react.mcp import MCPTools
from gated_react.testing import ScriptedChatModel, call

from .support.results import invoked


class Server(NamedTuple):
    """The module's notes server (``shared_mcp``, tests/conftest.py) as one test found it."""

    tools: MCPTools
    prefix: str
    before: int  # entries in its ledger when the test started

    def sent(self) -> list[int]:
        """The amounts the test sent: the ledger past what it held before."""
        return _ledger(self.tools, self.prefix)[self.before :]


def _ledger(tools: MCPTools, prefix: str) -> list[int]:
    tool = next(tool for tool in tools if tool.name == f"{prefix}__ledger")
    amounts: list[int] = tool.invoke({})["sent"]
    return amounts


@pytest.fixture
def server(shared_mcp: tuple[MCPTools, str]) -> Server:
    tools, prefix = shared_mcp
    return Server(tools, prefix, len(_ledger(tools, prefix)))


def run_graph(tools: MCPTools, replies: list[Any], **policy: Any) -> dict[str, Any]:
    graph = build_graph(ScriptedChatModel(replies=replies), tools, policy=Policy(**policy))
    return dict(invoked(graph, {"goal": "pay"}))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            {"amount": 5, "to": "attacker-account"},
            "unknown arguments ['to']; {tool} takes ['amount']",
        ),
        ({"amount": "all of it"}, "invalid arguments for {tool}: amount: 'all of it' is not"),
        ({"amount": 2.5}, "invalid arguments for {tool}: amount: 2.5 is not of type"),
        ({}, "invalid arguments for {tool}: args: 'amount' is a required property"),
    ],
)
def test_arguments_that_do_not_fit_the_schema_are_refused_unsent(
    server: Server, args: dict[str, Any], says: str
) -> None:
    tools, prefix, _ = server
    tool = f"{prefix}__transfer"
    out = run_graph(tools, [call(tool, **args)])
    assert out["stop_reason"] == f"tool_bad_args:{tool}"
    assert out["message"].startswith(says.format(tool=tool))
    assert server.sent() == []
    observed = run_graph(tools, [call(tool, **args), "refused"], on_tool_error="observe")
    assert observed["history"][0]["observation"].startswith(says.format(tool=tool))
    assert server.sent() == []


def test_arguments_that_fit_are_sent(server: Server) -> None:
    tools, prefix, _ = server
    out = run_graph(tools, [call(f"{prefix}__transfer", amount=5), "sent"])
    assert out["stop_reason"] == "success"
    assert out["history"][0]["observation"] == {"result": "sent 5"}
    assert server.sent() == [5]


def test_an_approvers_edit_is_checked_against_the_schema_too(
    server: Server,
) -> None:
    tools, prefix, _ = server
    tool = f"{prefix}__transfer"
    model = ScriptedChatModel(replies=[call(tool, amount=5), "done"], cycle=False)
    policy = Policy(require_approval={tool})
    graph = build_graph(model, tools, policy=policy, checkpointer=InMemorySaver())
    assert run(graph, "pay", thread_id="t")["status"] == "paused"
    edit = {"approved": True, "args": {"amount": 5, "to": "attacker-account"}}
    again = resume(graph, "t", edit)
    assert again["status"] == "paused"
    assert "unknown arguments ['to']" in again["pending"][0]["error"]
    assert server.sent() == []
