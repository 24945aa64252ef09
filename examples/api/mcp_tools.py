"""Tools from an MCP server, under the gate. Needs the mcp extra: pip install 'gated-react[mcp]'.

The server is this file run with `serve`: a FastMCP notes server over stdio. Its read-only
tools run freely; its destructive one pauses for a human. Runs offline with a scripted model.
"""

import sys

from langgraph.checkpoint.memory import InMemorySaver

from gated_react import build_graph, resume, run
from gated_react.mcp import load_tools, mcp_policy
from gated_react.testing import ScriptedChatModel, call


def serve():
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    notes = {"draft": "to delete", "todo": "buy milk"}
    server = FastMCP("notes", log_level="ERROR")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def list_notes() -> list[str]:
        """The titles of all notes."""
        return sorted(notes)

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def delete_note(title: str) -> str:
        """Delete one note."""
        notes.pop(title, None)
        return f"deleted {title}; {len(notes)} left"

    server.run("stdio")


if sys.argv[1:] == ["serve"]:
    serve()
    sys.exit()

config = {"mcpServers": {"notes": {"command": sys.executable, "args": [__file__, "serve"]}}}
model = ScriptedChatModel(
    replies=[
        call("notes__list_notes"),
        call("notes__delete_note", title="draft"),
        "Deleted the draft; 1 note left.",
    ]
)

with load_tools(config) as tools:  # the server stops when the block ends
    print("tools:", [tool.name for tool in tools])
    policy = mcp_policy(tools)  # destructive tools ask first
    print("asks first:", sorted(policy.require_approval))
    graph = build_graph(model, tools, policy=policy, checkpointer=InMemorySaver())
    out = run(graph, "Delete the draft note.", thread_id="notes-1")
    question = out["pending"][0]
    print(f"{out['status']}: {question['tool']} {question['args']}")
    out = resume(graph, "notes-1", {"approved": True})
    print(f"{out['stop_reason']}: {out['answer']}")
    print("observations:", [step["observation"] for step in out["history"]])
