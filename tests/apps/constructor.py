"""What a program under test imports in place of ``langchain.agents.create_agent``.

The harness picks the constructor with ``APPS_CONSTRUCTOR`` (``create_agent`` or
``gated_react``), so one program file runs on both. The graph comes back wrapped: every
``invoke`` / ``stream`` (and their async twins) passes through unchanged, and what the program
got back is appended to the JSON-lines file ``APPS_RECORD`` (the result, the stream's chunks, and
the thread's stored state after the call), for the harness to compare. Nothing else changes: the
wrapper hands every other attribute to the graph.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

from .describe import describe

CONSTRUCTORS = ("create_agent", "gated_react")


def create_agent(*args: Any, **kwargs: Any) -> Recorded:
    kind = os.environ["APPS_CONSTRUCTOR"]
    if kind == "create_agent":
        from langchain.agents import create_agent as make
    elif kind == "gated_react":
        from gated_react import build_graph as make
    else:
        raise SystemExit(f"APPS_CONSTRUCTOR must be one of {CONSTRUCTORS}, got {kind!r}")
    return Recorded(make(*args, **kwargs), os.environ["APPS_RECORD"])


def _config(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return kwargs.get("config", args[1] if len(args) > 1 else None)


class Recorded:
    """A compiled graph whose calls are recorded as the program sees them."""

    def __init__(self, graph: Any, path: str) -> None:
        self._graph = graph
        self._path = path

    def __getattr__(self, name: str) -> Any:
        return getattr(self._graph, name)

    def _write(self, entry: dict[str, Any]) -> None:
        with open(self._path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry, default=repr) + "\n")

    def _stored(self, config: Any) -> Any:
        """The thread's stored values after a call (None without a checkpointer)."""
        if not config or self._graph.checkpointer is None:
            return None
        return describe(self._graph.get_state(config).values)

    def _mode(self, kwargs: dict[str, Any]) -> Any:
        return kwargs.get("stream_mode", "values")

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        result = self._graph.invoke(*args, **kwargs)
        stored = self._stored(_config(args, kwargs))
        self._write({"call": "invoke", "result": describe(result), "stored": stored})
        return result

    async def ainvoke(self, *args: Any, **kwargs: Any) -> Any:
        result = await self._graph.ainvoke(*args, **kwargs)
        stored = self._stored(_config(args, kwargs))
        self._write({"call": "ainvoke", "result": describe(result), "stored": stored})
        return result

    def _streamed(self, call: str, chunks: list[Any], args: Any, kwargs: dict[str, Any]) -> None:
        """Written also when the program's loop body raised (a KeyError on a chunk, say):
        the chunks it had by then, and that it did not get to the end."""
        entry = {"call": call, "mode": describe(self._mode(kwargs)), "chunks": chunks}
        self._write(entry | {"stored": self._stored(_config(args, kwargs))})

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        chunks: list[Any] = []
        try:
            for chunk in self._graph.stream(*args, **kwargs):
                chunks.append(describe(chunk))
                yield chunk
        finally:
            self._streamed("stream", chunks, args, kwargs)

    async def astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        chunks: list[Any] = []
        try:
            async for chunk in self._graph.astream(*args, **kwargs):
                chunks.append(describe(chunk))
                yield chunk
        finally:
            self._streamed("astream", chunks, args, kwargs)
