"""Runs whose tool never returns, printed as JSON lines; then the process simply ends.

``python -m tests.reliability.hung_tools STORE.sqlite``: used by ``test_tool_faults`` in a child
process, which must exit on its own although the sync tools are still blocked in their threads.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from gated_react import Policy, aopen_checkpointer, build_graph, open_checkpointer
from gated_react.testing import ScriptedChatModel, call

from ..support.results import ainvoked, invoked

_FOREVER = threading.Event()  # never set: the sync tool blocks for the life of the process


def _block() -> str:
    _FOREVER.wait()
    return "never"


async def _ablock() -> str:
    await asyncio.Event().wait()  # never set; cancelled by the timeout
    return "never"


def _tool(asynchronous: bool) -> BaseTool:
    if asynchronous:
        return StructuredTool.from_function(coroutine=_ablock, name="hang", description="Hangs.")
    return StructuredTool.from_function(func=_block, name="hang", description="Hangs.")


def _row(case: str, out: Any, stored: dict[str, Any]) -> None:
    """One case as a JSON line: how the run ended (its trace from its record) and what the
    store holds of the end."""
    row = {
        "case": case,
        "stop_reason": out["stop_reason"],
        "message": out["message"],
        "trace_errors": [t.get("error") for t in out["trace"] if t.get("error")],
        "stored": stored["stop_reason"],
    }
    print(json.dumps(row), flush=True)


def _policy(on_error: str) -> Policy:
    return Policy(tool_timeouts={"hang": 0.2}, on_tool_error=on_error)  # type: ignore[arg-type]


def sync_case(store: str, on_error: str) -> None:
    model = ScriptedChatModel(replies=[call("hang"), "gave up on hang"])
    config: Any = {"configurable": {"thread_id": f"sync-{on_error}"}}
    with open_checkpointer(store) as saver:
        graph = build_graph(model, [_tool(False)], policy=_policy(on_error), checkpointer=saver)
        out = invoked(graph, {"goal": "g"}, config)
        _row(f"sync tool, invoke, {on_error}", out, graph.get_state(config).values)


async def async_case(store: str, asynchronous: bool, on_error: str) -> None:
    model = ScriptedChatModel(replies=[call("hang"), "gave up on hang"])
    kind = "async" if asynchronous else "sync"
    config: Any = {"configurable": {"thread_id": f"a{kind}-{on_error}"}}
    async with aopen_checkpointer(store) as saver:
        tools = [_tool(asynchronous)]
        graph = build_graph(model, tools, policy=_policy(on_error), checkpointer=saver)
        out = await ainvoked(graph, {"goal": "g"}, config)
        _row(f"{kind} tool, ainvoke, {on_error}", out, (await graph.aget_state(config)).values)


def main() -> None:
    store = sys.argv[1]
    sync_case(store, "stop")
    sync_case(store, "observe")
    asyncio.run(async_case(store, asynchronous=False, on_error="stop"))
    asyncio.run(async_case(store, asynchronous=True, on_error="stop"))
    asyncio.run(async_case(store, asynchronous=True, on_error="observe"))
    alive = [t.name for t in threading.enumerate() if t.name == "gated-react-tool"]
    print(f"blocked tool threads at exit: {len(alive)}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
