"""The compiled graph inside LangChain and LangGraph apps: a Runnable with the same result shape
through every entry point, a subgraph node, and an agent other agents call as a tool."""

from __future__ import annotations

import asyncio
import operator
import re
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph.types import Command

from gated_react import (
    Policy,
    as_tool,
    build_graph,
    naming_inputs,
    open_checkpointer,
    result_of,
    with_input_ids,
)
from gated_react.state import RunReply
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from .support.docs import page, section
from .support.helpers import REFUND_42, REFUND_GOAL, as_subgraph
from .support.results import ainvoked, invoked

RESULT = set(RunReply.model_fields)
"""What ``invoke`` returns without a ``response_format`` (create_agent's keys and the stop)."""
REPO = Path(__file__).resolve().parents[1]


def _agent(replies: list[Any] = REFUND_42, **policy: Any) -> Any:
    return build_graph(
        ScriptedChatModel(replies=_own_ids(replies)), SUPPORT_TOOLS, policy=Policy(**policy)
    )


def _own_ids(replies: list[Any]) -> list[Any]:
    """The script with call ids of this run's own: ``REFUND_42`` is one list of messages, and
    a run that reuses another run's call ids is answered from that run's record (see
    ``test_a_call_id_an_unrelated_run_used_before_runs_its_own_tool``)."""
    return [
        reply.model_copy(update={"tool_calls": [
            {**c, "id": f"call_{uuid.uuid4().hex[:8]}"} for c in reply.tool_calls
        ]})
        if isinstance(reply, AIMessage) and reply.tool_calls
        else reply
        for reply in replies
    ]  # fmt: skip


def _reference() -> dict[str, Any]:
    graph = _agent()
    out: dict[str, Any] = graph.invoke({"goal": REFUND_GOAL})
    assert set(out) == RESULT
    return _derived(graph, out)


def _derived(graph: Any, out: dict[str, Any]) -> dict[str, Any]:
    """``out`` with what the run's record and conversation say of it (read right after the
    run, while it is the newest run without a checkpointer)."""
    return {**out, **result_of(graph, out)}


def _same(out: dict[str, Any], reference: dict[str, Any]) -> None:
    """The result's keys and the derived views with equal values, but for the measured seconds
    and the ids of messages and calls (fresh in every run)."""
    assert set(out) >= RESULT
    assert _chat(out) == _chat(reference)
    keys = RESULT - {"messages"} | {"answer", "trace"}
    assert {key: out[key] for key in keys} == {key: reference[key] for key in keys}
    assert _calls(out) == _calls(reference)
    assert {**out["usage"], "seconds": 0} == {**reference["usage"], "seconds": 0}


def _calls(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The history without the calls' ids."""
    return [{**e, "action": {**e["action"], "id": None}} for e in result["history"]]


def _chat(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m.type, m.text) for m in result["messages"]]


def test_sync_and_async_invoke_and_batch_return_the_same_shape() -> None:
    reference = _reference()
    graph = _agent()
    out = asyncio.run(graph.ainvoke({"goal": REFUND_GOAL}))
    assert set(out) == RESULT
    _same(_derived(graph, out), reference)
    graph = _agent()
    batch = graph.batch([{"goal": REFUND_GOAL}])
    assert set(batch[0]) == RESULT
    _same(_derived(graph, batch[0]), reference)


def test_stream_and_astream_end_with_the_result() -> None:
    reference = _reference()
    graph = _agent()
    chunks = list(graph.stream({"goal": REFUND_GOAL}, stream_mode="values"))
    _same(_derived(graph, chunks[-1]), reference)

    async def collect() -> list[dict[str, Any]]:
        return [part async for part in _agent().astream({"goal": REFUND_GOAL})]

    updates = asyncio.run(collect())  # default: one update per node
    assert [next(iter(u)) for u in updates][:5] == [
        "decide",
        "validate",
        "gate",
        "execute",
        "observe",
    ]
    assert updates[-1]["finish"]["stop_reason"] == "success"


def test_astream_events_reports_the_model_the_nodes_and_the_result() -> None:
    reference = _reference()

    async def collect() -> list[dict[str, Any]]:
        stream = graph.astream_events({"goal": REFUND_GOAL}, version="v2")
        return [event async for event in stream]

    graph = _agent()
    events = asyncio.run(collect())
    assert sum(e["event"] == "on_chat_model_end" for e in events) == 4
    assert [e["name"] for e in events if e["event"] == "on_tool_end"] == [
        "get_user_profile",
        "get_user_billing",
        "search_policy",
    ]
    _same(_derived(graph, events[-1]["data"]["output"]), reference)
    assert (events[-1]["event"], events[-1]["name"]) == ("on_chain_end", "gated-react")


class Desk(TypedDict, total=False):
    """A user's support desk: only refund questions go to the agent."""

    question: str
    goal: str
    messages: Annotated[list[AnyMessage], add_messages]  # the agent's conversation
    stop_reason: str | None
    reply: str
    handled_by: Annotated[list[str], operator.add]


def _route(state: Desk) -> dict[str, Any]:
    return {"goal": state["question"], "handled_by": ["route"]}


def _pick(state: Desk) -> Literal["refunds", "faq"]:
    return "refunds" if "refund" in state["question"].lower() else "faq"


def _faq(state: Desk) -> dict[str, Any]:
    return {"reply": "See the FAQ.", "handled_by": ["faq"]}


def _post(state: Desk) -> dict[str, Any]:
    if state["stop_reason"] != "success":
        return {"reply": f"Escalated to a human ({state['stop_reason']}).", "handled_by": ["post"]}
    answer = state["messages"][-1].text
    return {"reply": f"{answer} (checked by policy)", "handled_by": ["post"]}


def _desk(agent: Any) -> Any:
    desk = StateGraph(Desk)
    desk.add_node("route", _route)
    desk.add_node("refunds", agent)  # the compiled gated-react graph is the node
    desk.add_node("faq", _faq)
    desk.add_node("post", _post)
    desk.add_edge(START, "route")
    desk.add_conditional_edges("route", _pick)
    desk.add_edge("refunds", "post")
    desk.add_edge("faq", END)
    desk.add_edge("post", END)
    return desk.compile(checkpointer=InMemorySaver())


def test_a_parent_graph_routes_into_the_agent_and_post_processes_its_answer() -> None:
    desk = _desk(_agent())
    out = desk.invoke({"question": REFUND_GOAL}, {"configurable": {"thread_id": "d1"}})
    assert out["handled_by"] == ["route", "post"]
    assert out["stop_reason"] == "success"
    assert out["reply"].startswith("Yes.")
    assert out["reply"].endswith("(checked by policy)")
    assert "USD 49.00" in out["reply"]
    faq = desk.invoke({"question": "Opening hours?"}, {"configurable": {"thread_id": "d2"}})
    assert (faq["reply"], faq["handled_by"]) == ("See the FAQ.", ["route", "faq"])
    drawn = desk.get_graph(xray=True)
    assert {"refunds:decide", "refunds:gate", "refunds:stop"} <= set(drawn.nodes)


def test_a_stopped_agent_inside_the_parent_is_a_branch_not_an_exception() -> None:
    replies = [call("get_user_billing", user_id=42)]
    desk = _desk(_agent(replies, allow=frozenset({"get_user_profile"})))
    out = desk.invoke({"question": REFUND_GOAL}, {"configurable": {"thread_id": "d3"}})
    assert out["reply"] == "Escalated to a human (tool_denied:get_user_billing)."


def test_an_approval_inside_the_subgraph_pauses_the_parent_and_resumes() -> None:
    replies = [call("get_user_billing", user_id=42), "USD 49"]
    desk = _desk(_agent(replies, require_approval=frozenset({"get_user_billing"})))
    config: Any = {"configurable": {"thread_id": "d4"}}
    paused = desk.invoke({"question": REFUND_GOAL}, config)
    assert paused["__interrupt__"][0].value["tool"] == "get_user_billing"
    done = desk.invoke(Command(resume={"approved": True}), config)
    assert done["reply"] == "USD 49 (checked by policy)"


def test_the_agents_own_steps_stream_only_with_subgraphs_as_the_guide_says() -> None:
    prose = section(page("guides/embedding.md"), "As a node of your own graph")
    prose = re.sub(r"```.*?```", "", prose, flags=re.DOTALL)  # prose only
    (snippet,) = [s for s in re.findall(r"`([^`]+)`", prose) if "subgraphs=True" in s]
    inputs = {"question": REFUND_GOAL}
    plain = _desk(_agent()).stream(inputs, {"configurable": {"thread_id": "s1"}})
    assert [next(iter(update)) for update in plain] == ["route", "refunds", "post"]
    scope = {
        "app": _desk(_agent()),
        "inputs": inputs,
        "config": {"configurable": {"thread_id": "s2"}},
    }
    parts = list(eval(snippet, scope))
    inner = [next(iter(update)) for space, update in parts if space]
    assert inner[:5] == ["decide", "validate", "gate", "execute", "observe"]
    assert inner[-1] == "finish"
    assert all(space[0].startswith("refunds:") for space, _ in parts if space)
    assert [next(iter(update)) for space, update in parts if not space] == [
        "route",
        "refunds",
        "post",
    ]


def _refund_desk(replies: list[Any] = REFUND_42, **policy: Any) -> Any:
    return as_tool(
        _agent(replies, **policy),
        "refund_desk",
        "Decides refund questions for one user; send the whole question as the goal.",
    )


def _outer(tool: Any, replies: list[Any], **policy: Any) -> Any:
    model = ScriptedChatModel(replies=replies)
    return build_graph(model, [tool], policy=Policy(**policy)), model


def test_another_gated_agent_calls_the_agent_as_a_tool() -> None:
    outer, model = _outer(
        _refund_desk(),
        [call("refund_desk", goal=REFUND_GOAL), "Refund approved: USD 49.00."],
    )
    out = invoked(outer, {"goal": "Handle ticket 1: " + REFUND_GOAL})
    assert (out["stop_reason"], out["answer"]) == ("success", "Refund approved: USD 49.00.")
    seen = out["history"][0]["observation"]
    assert set(seen) == {"status", "stop_reason", "message", "answer"}
    assert (seen["status"], seen["stop_reason"]) == ("ok", "success")
    assert "USD 49.00" in seen["answer"]
    bound = model.requests[0]  # the outer model saw the tool's schema: one goal string
    assert isinstance(bound[0].content, str)


def test_a_stopped_inner_run_is_an_observation_not_an_exception() -> None:
    inner = [call("get_user_billing", user_id=42)]
    tool = _refund_desk(inner, allow=frozenset({"get_user_profile"}))
    outer, _ = _outer(tool, [call("refund_desk", goal="refund?"), "I could not decide it."])

    async def go() -> dict[str, Any]:
        return dict(await ainvoked(outer, {"goal": "ticket 2"}))  # async path

    out = asyncio.run(go())
    assert out["stop_reason"] == "success"
    seen = out["history"][0]["observation"]
    assert (seen["status"], seen["stop_reason"]) == ("stopped", "tool_denied:get_user_billing")
    assert seen["answer"] is None
    assert out["trace"][0]["ok"] is True


def test_an_inner_approval_comes_back_as_paused() -> None:
    inner = build_graph(
        ScriptedChatModel(replies=[call("get_user_billing", user_id=42)]),
        SUPPORT_TOOLS,
        policy=Policy(require_approval=frozenset({"get_user_billing"})),
        checkpointer=InMemorySaver(),
    )
    seen = as_tool(inner, "refund_desk", "Decides refunds.").invoke({"goal": "refund?"})
    assert (seen["status"], seen["stop_reason"]) == ("paused", None)
    assert seen["pending"][0]["tool"] == "get_user_billing"


def test_an_inner_approval_with_no_store_to_pause_on_is_a_stop() -> None:
    inner = [call("get_user_billing", user_id=42)]
    tool = _refund_desk(inner, require_approval=frozenset({"get_user_billing"}))
    seen = tool.invoke({"goal": "refund?"})
    assert (seen["status"], seen["stop_reason"]) == (
        "stopped",
        "approval_unavailable:get_user_billing",
    )


def test_the_inner_run_writes_nothing_into_the_callers_store(tmp_path: Path) -> None:
    with open_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[call("refund_desk", goal=REFUND_GOAL), "done"])
        outer = build_graph(model, [_refund_desk()], checkpointer=saver)
        out = invoked(outer, {"goal": "ticket 3"}, {"configurable": {"thread_id": "outer"}})
        assert out["history"][0]["observation"]["stop_reason"] == "success"
        stored = list(saver.list(None))
        assert {c.config["configurable"]["thread_id"] for c in stored} == {"outer"}
        assert {c.config["configurable"]["checkpoint_ns"] for c in stored} == {""}


def test_a_langchain_agent_calls_it_too() -> None:
    model = ScriptedChatModel(replies=[call("refund_desk", goal=REFUND_GOAL), "USD 49, approved."])
    app = create_agent(model, tools=[_refund_desk()])
    out = app.invoke({"messages": [HumanMessage("ticket 4: " + REFUND_GOAL)]})
    result = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert '"stop_reason": "success"' in str(result.content)
    assert out["messages"][-1].content == "USD 49, approved."


@pytest.mark.parametrize(
    ("name", "description", "error"),
    [
        ("refund desk", "d", "must be 1-64 letters"),
        ("", "d", "must be 1-64 letters"),
        ("desk", "  ", "needs a description"),
    ],
)
def test_bad_tool_definitions_are_clear_errors(name: str, description: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        as_tool(_agent(), name, description)


def test_idempotent_is_opt_in() -> None:
    assert _refund_desk().metadata == {"idempotent": False}
    flagged = as_tool(_agent(), "desk", "d", idempotent=True)
    assert flagged.metadata == {"idempotent": True}


def test_a_replay_or_fork_of_the_parent_is_the_same_run_of_the_agent_inside() -> None:
    """A tester replayed and forked a parent graph from before its agent node: each was a new
    run of the agent (its records kept under the parent's task id, new every time), with fresh
    budgets, and a payment ran five times. The agent's run is named by the node it runs in."""
    from langchain_core.tools import tool

    paid: list[str] = []

    @tool
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    replies = [call("pay", to="bob"), "paid"] * 4  # each replay asks the model anew
    agent = build_graph(ScriptedChatModel(replies=replies), [pay], policy=Policy())
    desk = _desk(agent)
    config: Any = {"configurable": {"thread_id": "d5"}}
    assert desk.invoke({"question": "refund bob"}, config)["stop_reason"] == "success"
    before = next(s for s in desk.get_state_history(config) if s.next == ("refunds",))
    desk.invoke(None, before.config)  # Studio's "re-run from here"
    forked = desk.update_state(before.config, {"handled_by": ["edited"]}, as_node="route")
    desk.invoke(None, forked)
    assert paid == ["bob"]


def _paying_parent(paid: list[str]) -> Any:
    """A parent graph whose one node is the agent, its state a conversation (``Outer``), and
    the agent's tool a payment that counts itself."""
    from langchain_core.tools import tool

    @tool
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    def reply(messages: list[Any]) -> Any:
        return (
            "paid" if any(isinstance(m, ToolMessage) for m in messages) else call("pay", to="bob")
        )

    agent = build_graph(ScriptedChatModel(replies=[reply], cycle=True), [pay])
    return as_subgraph(agent, InMemorySaver())


PARENT_STAMPS = pytest.mark.xfail(
    strict=True,
    reason="src: the parent's add_messages gives its input's id-less message a new id at each "
    "replay of its input checkpoint, and the agent's run is named by its question's id: each "
    "replay is a new run that pays again (with_input_ids or naming_inputs avoid it)",
)


@pytest.mark.parametrize(
    "named", ["input", "graph", "graph-async", pytest.param("no", marks=PARENT_STAMPS)]
)
def test_a_parents_input_replayed_is_one_run_of_the_agent_inside(named: str) -> None:
    """A parent graph's input checkpoint replayed 3 times (found by an outside tester: 4
    payments for one question): one payment when the input went through ``with_input_ids``,
    or the parent through ``naming_inputs`` (a copy by ``with_config`` too)."""
    paid: list[str] = []
    parent = _paying_parent(paid)
    if named.startswith("graph"):
        parent = naming_inputs(parent).with_config(recursion_limit=50)
        assert naming_inputs(parent) is parent
        assert type(naming_inputs(_paying_parent([]))) is type(parent)  # one class per kind
    config: Any = {"configurable": {"thread_id": "p"}}
    sent: Any = {"messages": [{"role": "user", "content": "pay bob"}]}
    if named == "graph-async":
        asyncio.run(parent.ainvoke(sent, config))
    else:
        parent.invoke(with_input_ids(sent) if named == "input" else sent, config)
    (started,) = [s for s in parent.get_state_history(config) if s.metadata["source"] == "input"]
    for _ in range(3):
        parent.invoke(None, started.config)
    assert paid == ["bob"]


def test_a_graph_build_graph_made_names_its_inputs_already() -> None:
    agent = build_graph(ScriptedChatModel(replies=["hi"]), [])
    assert naming_inputs(agent) is agent
