"""7c. The prompt cache across chat turns: how much of a follow-up turn's requests a server that
caches prompt prefixes already holds, gated-react against ``create_agent`` on one conversation.

Turn 1 looks up records 1-3 and answers; turn 2 (a follow-up on the same thread) looks up records
4-5 and answers. Each runtime runs it with ``prefix_record.RecordingChatOpenAI`` (the request
bodies ChatOpenAI would send, kept, replies by script); a request's cached share is what it
shares from its start with the request before it (whole messages, then tokens at 4 characters
each), which is what llama-server's one slot or a provider's prefix cache can reuse.

    python -m benchmarks.turn_cache
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks.prefix_record import RecordingChatOpenAI, lookup_tool
from gated_react import Policy, build_graph

TURNS = (("Look up records 1 to 3, then say done.", 3), ("Now records 4 and 5.", 2))
_USAGE = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}


class TwoTurns(RecordingChatOpenAI):
    """Replies by where the request is in the conversation: a lookup per record of the turn (the
    calls after the request's last question), then done; the same for every runtime."""

    def _scripted(self, messages: list[BaseMessage], stop: Any, kwargs: Any) -> ChatResult:
        payload = self._get_request_payload(messages, stop=stop, **kwargs)
        self._requests.append(payload)
        sent = payload["messages"]
        asked = [i for i, m in enumerate(sent) if m["role"] == "user" and _question(m)]
        turn = int(TURNS[1][0] in str(sent[asked[-1]]["content"]))
        done = sum(1 for m in sent[asked[-1] + 1 :] if m["role"] == "tool" or not _question(m))
        first = 1 + sum(count for _, count in TURNS[:turn])
        record = first + done
        if self.json_replies:
            action: dict[str, Any] = {"kind": "tool", "name": "lookup", "args": {"record": record}}
            if done >= TURNS[turn][1]:
                action = {"kind": "final", "answer": "done"}
            message = AIMessage(json.dumps(action), usage_metadata=_USAGE)  # type: ignore[arg-type]
        elif done >= TURNS[turn][1]:
            message = AIMessage("done", usage_metadata=_USAGE)  # type: ignore[arg-type]
        else:
            call_id = "call_" + hashlib.sha1(str(record).encode()).hexdigest()[:24]
            call = {"name": "lookup", "args": {"record": record}, "id": call_id}
            message = AIMessage("", tool_calls=[call], usage_metadata=_USAGE)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])


def _question(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return message["role"] != "user" or not str(content).startswith("Observation: ")


def _model(json_replies: bool = False) -> TwoTurns:
    return TwoTurns(
        steps=1,
        json_replies=json_replies,
        model="smollm2-135m-instruct",
        api_key="never-sent",  # type: ignore[arg-type]
        base_url="http://127.0.0.1:9/v1",
        temperature=0,
        max_tokens=1,  # type: ignore[call-arg]
        disable_streaming=True,
    )


def _ours(protocol: str) -> list[list[dict[str, Any]]]:
    model = _model(json_replies=protocol == "json")
    policy = Policy().replace(protocol=protocol, max_steps=20, max_tool_calls=20)
    graph = build_graph(model, [lookup_tool()], policy=policy, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    turns = []
    for question, _ in TURNS:
        before = len(model.requests)
        graph.invoke({"messages": [("user", question)]}, config)
        turns.append(model.requests[before:])
    return turns


def _create_agent(system: str) -> list[list[dict[str, Any]]]:
    from langchain.agents import create_agent

    model = _model()
    agent = create_agent(model, [lookup_tool()], system_prompt=system, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    turns = []
    for question, _ in TURNS:
        before = len(model.requests)
        agent.invoke({"messages": [("user", question)]}, config)
        turns.append(model.requests[before:])
    return turns


def _tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(m, sort_keys=True)) for m in messages) // 4


def shared(previous: dict[str, Any], request: dict[str, Any]) -> tuple[int, int, int]:
    """Leading messages the request shares with the one before, their tokens, and its tokens."""
    old, new = previous["messages"], request["messages"]
    count = 0
    while count < min(len(old), len(new)) and old[count] == new[count]:
        count += 1
    return count, _tokens(new[:count]), _tokens(new)


def measure() -> dict[str, dict[str, Any]]:
    runs = {"ours_tools": _ours("tools"), "ours_json": _ours("json")}
    system = runs["ours_tools"][0][0]["messages"][0]["content"]
    runs["create_agent"] = _create_agent(system)
    out = {}
    for runtime, (first, second) in runs.items():
        count, cached, total = shared(first[-1], second[0])
        pairs = list(zip([first[-1], *second[:-1]], second, strict=True))
        all_cached = sum(shared(a, b)[1] for a, b in pairs)
        all_total = sum(_tokens(b["messages"]) for _, b in pairs)
        out[runtime] = {
            "turn2_first_shared_messages": f"{count}/{len(second[0]['messages'])}",
            "turn2_first_cached_share": round(cached / total, 3),
            "turn2_cached_share": round(all_cached / all_total, 3),
            "turn2_requests": len(second),
        }
    return out


if __name__ == "__main__":
    for runtime, figures in measure().items():
        print(runtime, json.dumps(figures))
