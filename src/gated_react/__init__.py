"""gated-react: a ReAct agent as a LangGraph state machine.

The model proposes; the policy decides.
"""

from gated_react.checkpoint import StoreError, aopen_checkpointer, open_checkpointer
from gated_react.graph import build_graph
from gated_react.locks import ThreadBusy
from gated_react.policy import Budget, Policy
from gated_react.runs import (
    NotWaiting,
    ThreadExists,
    UnknownThread,
    aresume,
    arun,
    read,
    resume,
    run,
)
from gated_react.state import RunInput, RunResult, State
from gated_react.stops import Stop, StopReason

__all__ = [
    "Budget",
    "NotWaiting",
    "Policy",
    "RunInput",
    "RunResult",
    "State",
    "Stop",
    "StopReason",
    "StoreError",
    "ThreadBusy",
    "ThreadExists",
    "UnknownThread",
    "aopen_checkpointer",
    "aresume",
    "arun",
    "build_graph",
    "open_checkpointer",
    "read",
    "resume",
    "run",
]
