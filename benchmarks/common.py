"""What every comparison shares: one scripted model, one tool, one step count, five runtimes."""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import PrivateAttr

from gated_react import Budget, Policy, build_graph

try:
    from gated_react._engine.conversation.transcript import calls_shown
except ImportError:  # a tree from before the engine was grouped (--base)
    from gated_react._engine.transcript import calls_shown  # type: ignore[no-redef]

OBSERVATION_BYTES = 1000
PEERS = ("ours", "create_agent", "create_react_agent", "floor", "plain_loop")
_USAGE = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}


class ScriptModel(BaseChatModel):
    """Zero-latency model: ``steps`` tool calls (distinct args), then a final answer.

    With ``count_prompts`` it records the approximate token count of every prompt it receives.
    """

    steps: int
    count_prompts: bool = False
    skip: int = 0
    stateless: bool = False
    _calls: int = PrivateAttr(default=0)
    _prompt_tokens: list[int] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "bench-script"

    @property
    def prompt_tokens(self) -> list[int]:
        return self._prompt_tokens

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        if self.stateless:  # one model (and graph) serves many concurrent runs
            self._calls = _calls_done(messages) + 1
        else:
            if not self._calls:
                self._calls = self.skip  # a resumed run continues the script where it stopped
            self._calls += 1
        if self.count_prompts:
            self._prompt_tokens.append(count_tokens_approximately(messages))
        if self._calls <= self.steps:
            call = {"name": "lookup", "args": {"record": self._calls}, "id": f"c{self._calls}"}
            message = AIMessage("", tool_calls=[call], usage_metadata=_USAGE)  # type: ignore[arg-type]
        else:
            message = AIMessage("done", usage_metadata=_USAGE)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return self._reply(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return self._reply(messages)


CRASH_AT: list[int] = []  # set by the resume benchmark: this record "kills" the process


def _calls_done(messages: list[BaseMessage]) -> int:
    """Tool calls a run has made, read from what the model is shown: the peers' tool messages,
    or gated-react's transcript (folded steps included)."""
    return calls_shown(messages)


def _lookup(record: int) -> str:
    """Look up one record by number."""
    if record in CRASH_AT:
        raise KeyboardInterrupt(f"simulated crash in record {record}")
    return f"record {record}: " + "x" * OBSERVATION_BYTES


async def _alookup(record: int) -> str:
    """Look up one record by number."""
    return _lookup(record)


def lookup_tool() -> BaseTool:
    """The one tool every runtime calls: sync and natively async, ~1 KB result, idempotent."""
    return StructuredTool.from_function(
        func=_lookup, coroutine=_alookup, name="lookup", metadata={"idempotent": True}
    )


FLOORS = ("floor", "wide_floor", "floor_channels", "floor_writes")
"""The five-node floor and its variants (``benchmarks.wide_floor``)."""


def build(peer: str, steps: int, checkpointer: Any = None, *, count_prompts: bool = False) -> Any:
    """A runnable for ``peer`` doing ``steps`` tool steps then a final answer."""
    return build_with(
        ScriptModel(steps=steps, count_prompts=count_prompts), peer, steps, checkpointer
    )


def build_with(model: ScriptModel, peer: str, steps: int, checkpointer: Any = None) -> Any:
    """The same, around a given model (to read its prompt counts afterwards)."""
    tools = [lookup_tool()]
    if peer == "ours":
        budget = Budget(max_steps=steps + 1, max_tool_calls=steps, max_seconds=1e6)
        return build_graph(model, tools, policy=Policy(budget=budget), checkpointer=checkpointer)
    if peer == "create_agent":
        from langchain.agents import create_agent

        return create_agent(model, tools, checkpointer=checkpointer)
    if peer == "create_react_agent":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated in favour of create_agent; still shipped
            from langgraph.prebuilt import create_react_agent

            return create_react_agent(model, tools, checkpointer=checkpointer)
    if peer == "plain_loop":
        return PlainLoop(model, tools[0])
    if peer in FLOORS:
        from benchmarks.wide_floor import floor_peer

        return floor_peer(peer, model, tools[0], checkpointer)
    raise ValueError(peer)


def run_input(peer: str) -> dict[str, Any]:
    return (
        {"goal": "look up the records"}
        if peer == "ours" or peer in FLOORS
        else {"messages": [("user", "look up the records")]}
    )


@dataclass
class PlainLoop:
    """A hand-written loop, no graph, no store, whole transcript resent each time."""

    model: ScriptModel
    tool: BaseTool
    messages: list[BaseMessage] = field(default_factory=list)

    def invoke(self, payload: dict[str, Any], config: Any = None, **_: Any) -> dict[str, Any]:
        messages: list[BaseMessage] = [HumanMessage(payload["messages"][0][1])]
        while True:
            reply = self.model.invoke(messages)
            messages.append(reply)
            if not reply.tool_calls:  # type: ignore[attr-defined]
                return {"messages": messages}
            for call in reply.tool_calls:  # type: ignore[attr-defined]
                result = self.tool.invoke(call["args"])
                messages.append(ToolMessage(str(result), tool_call_id=call["id"]))

    async def ainvoke(
        self, payload: dict[str, Any], config: Any = None, **_: Any
    ) -> dict[str, Any]:
        messages: list[BaseMessage] = [HumanMessage(payload["messages"][0][1])]
        while True:
            reply = await self.model.ainvoke(messages)
            messages.append(reply)
            if not reply.tool_calls:  # type: ignore[attr-defined]
                return {"messages": messages}
            for call in reply.tool_calls:  # type: ignore[attr-defined]
                result = await self.tool.ainvoke(call["args"])
                messages.append(ToolMessage(str(result), tool_call_id=call["id"]))


@dataclass
class Stat:
    """Median, min and max of repeated measurements."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Stat:
        return cls(statistics.median(values), min(values), max(values))

    def json(self, digits: int = 4) -> dict[str, float]:
        return {
            "median": round(self.median, digits),
            "min": round(self.low, digits),
            "max": round(self.high, digits),
        }


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def ratio(ours: float, peer: float) -> float:
    return round(ours / peer, 3) if peer else float("nan")
