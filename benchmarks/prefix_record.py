"""7a. The exact requests each runtime sends over one scripted trajectory, as ChatOpenAI sends them.

The model is a ``ChatOpenAI`` whose network call is replaced by a script: every request it would
send (``_get_request_payload``: messages, tools, response format) is kept, and the reply follows
the same trajectory for every runtime: ``steps`` lookups with distinct records, then an answer.
"""

from __future__ import annotations

import hashlib
import json
import random
import warnings
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from langchain_openai import ChatOpenAI
from pydantic import PrivateAttr

from gated_react import Policy, build_graph
from gated_react._engine.conversation.transcript import calls_shown

RUNTIMES = ("ours_json", "ours_tools", "create_agent", "create_react_agent")
BASELINE = "create_agent"
GOAL = "Look up the records one by one, starting at record 1, then tell me you are done."
OBSERVATION_CHARS = 300
_WORDS = (
    *("renewal", "invoice", "refund", "paid", "pending", "annual", "monthly", "overdue"),
    *("credit", "card", "bank", "transfer", "customer", "asked", "about", "plan", "upgrade"),
    *("shipped", "returned", "late", "approved", "denied", "follow-up", "ticket", "EU", "US"),
)
_USAGE = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}


def record_text(record: int) -> str:
    """A ~300-character lookup result that reads like data (``x`` * 300 would tokenize to a
    handful of tokens and flatter whoever sends it most)."""
    rng = random.Random(record)
    fields = {
        "id": record,
        "owner": f"user-{rng.randint(1000, 9999)}",
        "plan": rng.choice(("basic", "team", "business", "enterprise")),
        "status": rng.choice(("active", "paused", "cancelled", "trial")),
        "updated": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "balance_usd": round(rng.uniform(0, 500), 2),
    }
    text = f"record {record}: {json.dumps(fields)} notes:"
    while len(text) < OBSERVATION_CHARS:
        text += " " + rng.choice(_WORDS)
    return text[:OBSERVATION_CHARS]


def lookup_tool() -> BaseTool:
    def lookup(record: int) -> str:
        """Look up one record by its number."""
        return record_text(record)

    return StructuredTool.from_function(lookup, metadata={"idempotent": True})


class RecordingChatOpenAI(ChatOpenAI):
    """ChatOpenAI that keeps each request payload instead of sending it, and replies by script:
    lookups of records 1..``steps`` (told apart by what the request shows as done), then done."""

    steps: int
    json_replies: bool = False
    """Reply as the JSON protocol's action objects instead of native tool calls."""
    _requests: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._requests

    def _scripted(self, messages: list[BaseMessage], stop: Any, kwargs: Any) -> ChatResult:
        self._requests.append(self._get_request_payload(messages, stop=stop, **kwargs))
        record = calls_shown(messages) + 1
        if self.json_replies:
            action: dict[str, Any] = {"kind": "tool", "name": "lookup", "args": {"record": record}}
            if record > self.steps:
                action = {"kind": "final", "answer": "done"}
            message = AIMessage(json.dumps(action), usage_metadata=_USAGE)  # type: ignore[arg-type]
        elif record > self.steps:
            message = AIMessage("done", usage_metadata=_USAGE)  # type: ignore[arg-type]
        else:
            call_id = "call_" + hashlib.sha1(str(record).encode()).hexdigest()[:24]
            call = {"name": "lookup", "args": {"record": record}, "id": call_id}
            message = AIMessage("", tool_calls=[call], usage_metadata=_USAGE)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return self._scripted(messages, stop, kw)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return self._scripted(messages, stop, kw)


def _model(steps: int, json_replies: bool = False) -> RecordingChatOpenAI:
    # What the replay asks of the server: prefill only (one token out), greedy.
    return RecordingChatOpenAI(
        steps=steps,
        json_replies=json_replies,
        model="smollm2-135m-instruct",
        api_key="never-sent",  # type: ignore[arg-type]
        base_url="http://127.0.0.1:9/v1",
        temperature=0,
        max_tokens=1,  # type: ignore[call-arg]
        disable_streaming=True,
    )


def _ours(steps: int, protocol: str) -> list[dict[str, Any]]:
    model = _model(steps, json_replies=protocol == "json")
    policy = Policy().replace(
        protocol=protocol, max_steps=steps + 1, max_tool_calls=steps, max_seconds=1e6
    )
    graph = build_graph(model, [lookup_tool()], policy=policy)
    graph.invoke({"goal": GOAL}, {"recursion_limit": 100_000})
    return model.requests


def _peer(steps: int, peer: str, system: str) -> list[dict[str, Any]]:
    model = _model(steps)
    if peer == "create_agent":
        from langchain.agents import create_agent

        agent = create_agent(model, [lookup_tool()], system_prompt=system)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated in favour of create_agent; still shipped
            from langgraph.prebuilt import create_react_agent

            agent = create_react_agent(model, [lookup_tool()], prompt=system)
    agent.invoke({"messages": [("user", GOAL)]}, {"recursion_limit": 100_000})
    return model.requests


def record(steps: int) -> dict[str, list[dict[str, Any]]]:
    """Every runtime's requests over the trajectory, in order. The peers get gated-react's
    system prompt for native tool calls, so the runtimes differ only in how they build requests."""
    requests = {"ours_tools": _ours(steps, "tools"), "ours_json": _ours(steps, "json")}
    system = requests["ours_tools"][0]["messages"][0]["content"]
    for peer in ("create_agent", "create_react_agent"):
        requests[peer] = _peer(steps, peer, system)
    for runtime, sent in requests.items():
        if len(sent) != steps + 1:  # the trajectory is the comparison: it must be the same
            raise RuntimeError(f"{runtime} sent {len(sent)} requests, expected {steps + 1}")
    return {runtime: requests[runtime] for runtime in RUNTIMES}
