"""A thread of ``langgraph dev`` as ``gated_react.read`` gives it. The server's REST API returns
the state's public channels (the conversation and the stop): the answer and the history are
derived from that conversation (``viewed``); the trace and usage from the run's record beside
the checkpoints, read here from the server's own store (``stored``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import convert_to_messages

from gated_react import open_checkpointer, read
from gated_react.graph import idle_graph
from gated_react.runs import shape
from gated_react.state import ThreadResult

from ..support.studio_server import DevServer


def viewed(values: Mapping[str, Any], thread_id: str = "") -> ThreadResult:
    """The result of a thread's values as the REST API returns them (plain JSON): the answer
    and history from its conversation (no trace or usage: those are the record's)."""
    conversation = convert_to_messages(values.get("messages") or [])
    return shape({**values, "messages": conversation}, thread_id, [])


def stored(dev: DevServer, thread_id: str) -> ThreadResult:
    """The thread's result, its trace and usage from the run's record in the server's store."""
    with open_checkpointer(str(dev.workdir / "runs.sqlite")) as saver:
        return read(idle_graph(saver), thread_id)
