"""The run's state as the checkpointer stores it.

Channels hold plain JSON values (nodes write ``model_dump()`` output), so any checkpointer, the
LangGraph server and Studio can store and show them without importing this package; ``messages``
holds LangChain messages, the convention chat clients read.

One module per concept, every name imported from here: ``actions`` (the model's reply and the
action made of it), ``calls`` (a call in hand, and the history and trace derived of calls),
``step`` (what one node hands the next), ``usage`` (budgets spent and extended), ``run`` (a
run's input, context and result), ``channels`` (``State``), ``views`` (shapes as TypedDicts).

A model LangGraph stores as itself (an input given as ``RunInput(...)``) is named in the store
by its ``__module__`` and class; the serializer revives only the models named
``gated_react.state.<class>``. Every model here says so whichever module defines it, so a store
written before this package had modules, and one written after, name the same classes.
"""

from pydantic import BaseModel

from gated_react.state.actions import (
    Action,
    FinalAction,
    Reply,
    Retry,
    ToolAction,
    ToolCalls,
    tool_actions,
)
from gated_react.state.base import dump
from gated_react.state.calls import Call, HistoryEntry, Outcome, Shown, TraceEntry
from gated_react.state.channels import CHANNELS, PUBLIC, State
from gated_react.state.run import (
    RESULT_KEYS,
    SUMMARY_KEYS,
    RunContext,
    RunInput,
    RunReply,
    RunResult,
    Status,
    last_human_text,
)
from gated_react.state.step import Answer, Ending, Step
from gated_react.state.usage import SECONDS_CAP, Extension, Usage
from gated_react.state.views import (
    ActionRequest,
    Question,
    ReviewConfig,
    RunInputDict,
    ThreadResult,
    UsageDict,
)

__all__ = [
    "CHANNELS",
    "PUBLIC",
    "RESULT_KEYS",
    "SECONDS_CAP",
    "SUMMARY_KEYS",
    "Action",
    "ActionRequest",
    "Answer",
    "Call",
    "Ending",
    "Extension",
    "FinalAction",
    "HistoryEntry",
    "Outcome",
    "Question",
    "Reply",
    "Retry",
    "ReviewConfig",
    "RunContext",
    "RunInput",
    "RunInputDict",
    "RunReply",
    "RunResult",
    "Shown",
    "State",
    "Status",
    "Step",
    "ThreadResult",
    "ToolAction",
    "ToolCalls",
    "TraceEntry",
    "Usage",
    "UsageDict",
    "dump",
    "last_human_text",
    "tool_actions",
]


def _named_here() -> None:
    """Each model's ``__module__`` made this package's: LangGraph's serializer names a stored
    model by it, and a class moved between modules must not change what a store calls it."""
    for value in tuple(globals().values()):
        if (
            isinstance(value, type)
            and issubclass(value, BaseModel)
            and value.__module__.startswith(f"{__name__}.")
        ):
            value.__module__ = __name__


_named_here()
