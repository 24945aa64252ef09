"""The scenarios durability tests run in child processes and in the test process: a scripted
model that answers from the prompt, tools with side effects, and the graph for a spec."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import BaseMessage
from langchain_core.tools import InjectedToolArg, tool
from langgraph.checkpoint.base import BaseCheckpointSaver

from gated_react import Policy, build_graph
from gated_react._engine.conversation.transcript import calls_shown
from gated_react._engine.langgraph_internals import CONFIG_KEY_DURABILITY
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools._meta import idempotent
from gated_react.tools.support import SUPPORT_TOOLS

from .helpers import REFUND_42


def progress(messages: list[BaseMessage]) -> int:
    """Tool calls done so far, read from the transcript the model is shown."""
    return calls_shown(messages)


def by_progress(script: list[Any]) -> ScriptedChatModel:
    """A model whose reply is ``script[tool calls done]``: like a deterministic LLM, the same
    prompt gets the same answer in any process, so a resumed run continues the script."""

    def reply(messages: list[BaseMessage]) -> Any:
        return script[min(progress(messages), len(script) - 1)]

    return ScriptedChatModel(replies=[reply], cycle=True)


@tool
def append_line(path: str, text: str, idempotency_key: Annotated[str, InjectedToolArg] = "") -> str:
    """Append one line to a file (a stand-in for sending a payment)."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{text} key={idempotency_key}\n")
    return "appended"


@idempotent
@tool
def record_line(path: str, text: str, idempotency_key: Annotated[str, InjectedToolArg] = "") -> str:
    """Append one line to a file; declared idempotent, so a resumed run may repeat it."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{text} key={idempotency_key}\n")
    return "recorded"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


TOOLS = {"support": SUPPORT_TOOLS, "append": [append_line, record_line]}


def scripts(spec: dict[str, Any]) -> list[Any]:
    """The named script; file tools write to ``spec["file"]``."""
    name, file = spec.get("script", "refund"), spec.get("file", "")
    found: dict[str, list[Any]] = {
        "refund": REFUND_42,
        "append": [call("append_line", path=file, text="refund 42: USD 49"), "sent"],
        "record": [call("record_line", path=file, text="refund 42: USD 49"), "sent"],
        "search": [
            call("search_policy", query="refund"),
            call("search_policy", query="pro monthly"),
            call("get_user_profile", user_id=42),
            "USD 49",
        ],
    }
    return found[name]


def graph_for(spec: dict[str, Any], saver: BaseCheckpointSaver[Any]) -> Any:
    """The graph for a spec: script, tools, policy and (to show its effect) durability."""
    policy = Policy.model_validate(spec.get("policy", {}))
    graph = build_graph(
        by_progress(scripts(spec)),
        TOOLS[spec.get("tools", "support")],
        policy=policy,
        checkpointer=saver,
    )
    if spec.get("durability"):
        graph = graph.with_config(configurable={CONFIG_KEY_DURABILITY: spec["durability"]})
    return graph


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A result without what legitimately differs between runs: wall-clock seconds, thread id,
    the ids of chat messages and of tool calls (messages compare by type and text, from objects
    or from JSON)."""
    usage = {k: v for k, v in result["usage"].items() if k != "seconds"}
    history = without_ids(result.get("history", []))
    skipped = ("usage", "thread_id", "messages", "history")
    return {
        **{k: v for k, v in result.items() if k not in skipped},
        "history": history,
        "usage": usage,
        "messages": [said(m) for m in result.get("messages", [])],
    }


def as_run(result: dict[str, Any]) -> dict[str, Any]:
    """What a run a fault interrupted must share with an uninterrupted one (compared as
    ``comparable`` compares results): everything but what the fault may add, the model calls
    it cost. A reply lost with a crashed process or a failed write is asked for again, and the
    run's record counts both calls (in ``usage``, in the trace's step numbers and in the
    closing ``message``, "final answer after N steps")."""
    seen = comparable(result)
    usage = {k: v for k, v in seen["usage"].items() if k in ("tool_calls", "per_tool")}
    trace = [{k: v for k, v in entry.items() if k != "step"} for entry in seen["trace"]]
    return {**seen, "usage": usage, "trace": trace, "message": None}


def model_calls_again(result: dict[str, Any], uninterrupted: dict[str, Any]) -> int:
    """The model calls a run made beyond the uninterrupted run's (what its faults cost)."""
    return int(result["usage"]["steps"]) - int(uninterrupted["usage"]["steps"])


def without_ids(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History entries without their calls' ids, which differ between runs (made from the
    model's message ids)."""
    return [
        {**entry, "action": {k: v for k, v in entry["action"].items() if k != "id"}}
        for entry in history
    ]


def said(message: Any) -> tuple[str, str]:
    if isinstance(message, dict):  # as a child process wrote it (tests/support/procs.py)
        return str(message.get("type")), str(message.get("content"))
    return message.type, str(message.content)
