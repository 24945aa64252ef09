"""The graph's shape: the nodes and labelled edges Studio draws, pinned by a Mermaid snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Policy, build_graph
from gated_react._engine.langgraph_internals import CONFIG_KEY_DURABILITY
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from .support.fakes import send_email
from .support.openai_server import FakeOpenAI, reply
from .support.results import invoked

SNAPSHOT = Path(__file__).parent / "snapshots" / "graph.mmd"
STEP_NODES = {"decide", "validate", "gate", "execute", "observe", "finish", "stop"}
NODES = {"__start__", *STEP_NODES, "__end__"}
EDGES = {
    ("__start__", "decide", None),
    ("decide", "validate", "reply"),
    ("decide", "stop", None),
    ("validate", "gate", "tool"),
    ("validate", "finish", "final"),
    ("validate", "decide", "retry"),
    ("validate", "stop", None),
    ("gate", "execute", "allowed"),
    ("gate", "stop", None),
    ("execute", "observe", None),
    ("observe", "decide", "next"),
    ("observe", "finish", "direct"),
    ("observe", "stop", None),
    ("finish", "__end__", None),
    ("stop", "__end__", None),
}


def _graph(**kwargs: object):  # type: ignore[no-untyped-def]
    return build_graph(ScriptedChatModel(replies=[]), SUPPORT_TOOLS, **kwargs)  # type: ignore[arg-type]


def test_nodes_and_edges_are_the_real_ones() -> None:
    drawn = _graph().get_graph()
    assert set(drawn.nodes) == NODES
    edges = {(e.source, e.target, e.data) for e in drawn.edges}
    assert edges == EDGES
    conditional = {(e.source, e.target) for e in drawn.edges if e.conditional}
    assert conditional == {
        (s, t) for s, t, _ in EDGES if s in {"decide", "validate", "gate", "observe"}
    }


def test_mermaid_snapshot() -> None:
    text = _graph().get_graph().draw_mermaid()
    if not SNAPSHOT.exists():  # first run writes it; review and commit
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text()


def test_the_same_graph_whatever_the_policy() -> None:
    plain = _graph().get_graph().draw_mermaid()
    other = (
        _graph(policy=Policy(protocol="text", on_tool_error="observe")).get_graph().draw_mermaid()
    )
    assert plain == other


def test_recursion_limit_comes_from_the_budget_and_no_checkpointer_by_default() -> None:
    graph = _graph(policy=Policy(budget={"max_steps": 12}))  # type: ignore[arg-type]
    assert graph.config["recursion_limit"] == 5 * 12 + 5  # type: ignore[index]
    assert graph.checkpointer is None


def test_durability_is_langgraphs_default_even_with_a_side_effecting_tool() -> None:
    """A call that is not idempotent is made safe by its run-once record, written before and
    after it runs, not by checkpointing every step synchronously."""
    tools = [*SUPPORT_TOOLS, send_email]
    for graph in (
        _graph(),
        build_graph(ScriptedChatModel(replies=[]), tools, checkpointer=InMemorySaver()),
        build_graph(ScriptedChatModel(replies=[]), tools),
    ):
        assert CONFIG_KEY_DURABILITY not in (graph.config or {}).get("configurable", {})


@pytest.mark.parametrize(
    ("as_node", "then"), [("validate", "gate"), ("gate", "execute"), ("observe", "decide")]
)
def test_a_state_edited_as_a_routing_node_continues_where_its_router_says(
    as_node: str, then: str
) -> None:
    """Studio's edit-and-continue (``update_state(..., as_node=...)``) asks the node's outgoing
    edges for the next node: routing by ``Command(goto=...)`` from inside the node would leave
    an edited thread with nothing to run (measured: 0.1x faster per step, and rejected for it)."""
    model = ScriptedChatModel(replies=[call("get_user_profile", user_id=42), "done"])
    graph = build_graph(model, SUPPORT_TOOLS, checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "edited"}}
    graph.invoke({"goal": "refund?"}, config, interrupt_before=["execute"])
    graph.update_state(config, {"goal": "refund, please?"}, as_node=as_node)
    assert graph.get_state(config).next == (then,)
    assert graph.invoke(None, config)["status"] in ("ok", "stopped")  # it ran to an end


def test_a_model_string_is_a_model_as_create_agent_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LangChain's init_chat_model; before, 'str' object has no attribute 'bind_tools'."""
    with FakeOpenAI([reply("Hello.")]) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        out = invoked(build_graph("openai:gpt-4.1-mini", SUPPORT_TOOLS), {"goal": "Say hello."})
        assert server.requests[0]["model"] == "gpt-4.1-mini"
    assert (out["stop_reason"], out["answer"]) == ("success", "Hello.")


def test_one_tool_instead_of_a_list_is_named() -> None:
    with pytest.raises(TypeError, match=r"^expected a list of tools, got StructuredTool$"):
        build_graph(ScriptedChatModel(replies=[]), send_email)  # type: ignore[arg-type]


def test_tools_default_to_none_as_create_agent_takes_them() -> None:
    """``build_graph(model, system_prompt=...)``: before, a TypeError (tools was required)."""
    model = ScriptedChatModel(replies=["Hi!"])
    graph = build_graph(model, system_prompt="You are friendly.")
    out = graph.invoke({"messages": [{"role": "user", "content": "hello"}]})
    assert (out["stop_reason"], out["messages"][-1].content) == ("success", "Hi!")
    assert "You are friendly." in model.requests[0][0].text
