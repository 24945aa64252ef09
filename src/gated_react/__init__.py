"""gated-react: a ReAct agent as a LangGraph state machine.

The model proposes; the policy decides.
"""

from gated_react.graph import build_graph
from gated_react.policy import Budget, Policy
from gated_react.state import RunInput, RunResult, State
from gated_react.stops import Stop, StopReason

__all__ = [
    "Budget",
    "Policy",
    "RunInput",
    "RunResult",
    "State",
    "Stop",
    "StopReason",
    "build_graph",
]
