"""Shared builders for tests: hand-made states, scripted runs, the support toolkit."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph, add_messages

from gated_react import Policy, build_graph
from gated_react._engine.authority import ledger as ledgers
from gated_react._engine.authority import records
from gated_react._engine.authority.backends import MemoryBackend
from gated_react._engine.deps import NodeDeps
from gated_react.protocols import PROTOCOLS
from gated_react.runs import result_of
from gated_react.state import Step, dump
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

REFUND_GOAL = (
    "User 42 asked: can I get a refund for my subscription now? "
    "Check profile, billing and policy; answer with the USD amount and the reason."
)
REFUND_42 = [
    call("get_user_profile", user_id=42),
    call("get_user_billing", user_id=42),
    call("search_policy", query="refund pro monthly"),
    "Yes. Anna's Pro monthly plan was first paid 10 days ago, within the 14-day window: "
    "a refund of USD 49.00 goes back to the original payment method.",
]
QUESTION_ID = "q-1"
"""The id of the question ``state`` puts in the conversation: the run's name."""


def policy(**fields: Any) -> Policy:
    """A Policy; budget fields (max_steps, ...) may be given at top level."""
    return Policy().replace(**fields)


def node_deps(model: Any, tools: Sequence[Any], chosen: Policy, *args: Any) -> NodeDeps:
    """``NodeDeps.build`` with the protocol the policy names, as ``build_graph`` picks it."""
    return NodeDeps.build(model, tools, chosen, *args, protocol=PROTOCOLS[chosen.protocol])


def deps(
    replies: Sequence[Any] = (), tools: Sequence[BaseTool] = SUPPORT_TOOLS, **fields: Any
) -> NodeDeps:
    return node_deps(ScriptedChatModel(replies=list(replies)), tools, policy(**fields))


def state(goal: str = REFUND_GOAL, messages: Sequence[Any] = (), **step: Any) -> dict[str, Any]:
    """A hand-built graph state: the question (then ``messages``) and a step of its run with
    ``step``'s fields, as a node reads its channels (plain JSON)."""
    question = HumanMessage(goal, id=QUESTION_ID)
    held = Step.model_validate({"run": QUESTION_ID, **step})
    return {"messages": [question, *messages], "step": dump(held)}


def run(
    replies: Sequence[Any],
    tools: Sequence[BaseTool] = SUPPORT_TOOLS,
    goal: str = REFUND_GOAL,
    **fields: Any,
) -> dict[str, Any]:
    """Run a whole graph with a scripted model; its result as ``gated_react.run`` gives it
    (invoke's, with the answer, history, trace and usage)."""
    graph = build_graph(ScriptedChatModel(replies=list(replies)), tools, policy=policy(**fields))
    return dict(result_of(graph, graph.invoke({"goal": goal})))


def as_another_process() -> None:
    """Forget what this process knows, as a process that continues a thread another one left
    (after a crash) knows nothing of it: its key (records signed with the old one no longer
    verify), the ledgers it had open, and the records kept in its memory."""
    records.process_key.cache_clear()
    ledgers._LEDGERS.clear()
    for saver in gc.get_objects():  # each saver carries its ledger
        if isinstance(saver, BaseCheckpointSaver):
            vars(saver).pop(ledgers._ATTRIBUTE, None)
    ledgers._LAST[0] = (lambda: None, ledgers._UNSAVED)
    ledgers._UNSAVED = ledgers.Ledger(MemoryBackend(ledgers.UNSAVED_RUNS))


class Outer(TypedDict):
    """A parent graph's state: the conversation its one node, an agent, carries on."""

    messages: Annotated[list[AnyMessage], add_messages]


def as_subgraph(agent: Any, saver: BaseCheckpointSaver[Any] | None) -> Any:
    """A parent graph with ``agent`` (a graph compiled without a checkpointer) as its one node
    ``agent``, saved by ``saver`` (None: itself a node of another graph): the agent's records
    are kept under ``<thread>|agent:<task>`` (``<thread>|agent:<task>|agent:<task>`` one more
    level down)."""
    outer = StateGraph(Outer)
    outer.add_node("agent", agent)
    outer.add_edge(START, "agent")
    outer.add_edge("agent", END)
    return outer.compile(checkpointer=saver)
