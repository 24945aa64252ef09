"""gated-react: a ReAct agent as a LangGraph state machine.

The model proposes; the policy decides.

Names are imported on first use (PEP 562), so ``import gated_react.settings`` or the CLI's
``--help`` do not pay for LangGraph and LangChain (about a second) until they need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gated_react.errors import (
        ArgumentRefused,
        GatedReactError,
        MiddlewareRefused,
        MisroutedStep,
        StoreError,
    )
    from gated_react.graph import build_graph
    from gated_react.interop import as_tool
    from gated_react.models import UnsupportedModel
    from gated_react.policy import Budget, Policy, Price, UnknownToolName, UnpricedModel
    from gated_react.runs import (
        NotWaiting,
        ThreadExists,
        UnknownThread,
        aread,
        aresult_of,
        aresume,
        arun,
        read,
        result_of,
        resume,
        run,
    )
    from gated_react.state import Question, RunInput, RunInputDict, RunResult, State, ThreadResult
    from gated_react.state.input_ids import naming_inputs, with_input_ids
    from gated_react.stops import Stop, StopReason
    from gated_react.store.checkpointer import aopen_checkpointer, open_checkpointer
    from gated_react.store.locks import ThreadBusy
    from gated_react.store.serializer import UnsafeCheckpoint

_HOMES = {
    "ArgumentRefused": "errors",
    "Budget": "policy",
    "GatedReactError": "errors",
    "MiddlewareRefused": "errors",
    "MisroutedStep": "errors",
    "NotWaiting": "runs",
    "Policy": "policy",
    "Price": "policy",
    "Question": "state",
    "RunInput": "state",
    "RunInputDict": "state",
    "RunResult": "state",
    "State": "state",
    "Stop": "stops",
    "StopReason": "stops",
    "StoreError": "errors",
    "ThreadBusy": "store.locks",
    "ThreadExists": "runs",
    "ThreadResult": "state",
    "UnknownThread": "runs",
    "UnknownToolName": "policy",
    "UnpricedModel": "policy",
    "UnsafeCheckpoint": "store.serializer",
    "UnsupportedModel": "models",
    "aopen_checkpointer": "store.checkpointer",
    "aread": "runs",
    "aresult_of": "runs",
    "aresume": "runs",
    "arun": "runs",
    "as_tool": "interop",
    "build_graph": "graph",
    "open_checkpointer": "store.checkpointer",
    "read": "runs",
    "result_of": "runs",
    "resume": "runs",
    "run": "runs",
    "naming_inputs": "state.input_ids",
    "with_input_ids": "state.input_ids",
}

__all__ = [
    "ArgumentRefused",
    "Budget",
    "GatedReactError",
    "MiddlewareRefused",
    "MisroutedStep",
    "NotWaiting",
    "Policy",
    "Price",
    "Question",
    "RunInput",
    "RunInputDict",
    "RunResult",
    "State",
    "Stop",
    "StopReason",
    "StoreError",
    "ThreadBusy",
    "ThreadExists",
    "ThreadResult",
    "UnknownThread",
    "UnknownToolName",
    "UnpricedModel",
    "UnsafeCheckpoint",
    "UnsupportedModel",
    "aopen_checkpointer",
    "aread",
    "aresult_of",
    "aresume",
    "arun",
    "as_tool",
    "build_graph",
    "naming_inputs",
    "open_checkpointer",
    "read",
    "result_of",
    "resume",
    "run",
    "with_input_ids",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # the installed package's, e.g. "0.1.0"
        from gated_react.release import package_version

        return package_version()
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'gated_react' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"gated_react.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
